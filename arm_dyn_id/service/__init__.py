"""The service wing: the served model behind the nodes, testable with no Node.

- :mod:`.gravity`: gravity-torque queries against an identified model, with
  the validation of every request (:class:`~.gravity.ServedModel`);
- :mod:`.samples`: what the identifier collects before a fit (the growing sample
  buffer, the segment-marker log).

Imports model, data and the foundation.
"""
