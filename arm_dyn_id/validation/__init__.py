"""The validation wing: how good a model is, measured on held-out data.

- :mod:`.metrics`: per-joint RMSE, RMSE % of max torque, MAE, correlation;
- :mod:`.report`: the HTML report and plots of a fit folder.

Imports the foundation only (metrics are plain arrays), so the identification
wing can score its candidates with the same numbers users see.
"""
