"""The service wing: the served model behind the nodes, testable with no Node.

- :mod:`.gravity`: gravity-torque queries against an identified model, with
  the validation of every request.

Imports model and the foundation.
"""
