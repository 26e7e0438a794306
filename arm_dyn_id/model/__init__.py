"""The robot model wing: what the arm is, independent of any data.

- :mod:`.robot`: :class:`RobotModel` from a URDF (pinocchio), its gravity and
  full-dynamics regressors, payloads;
- :mod:`.base_parameters`: base (minimal) parameter sets by pivoted QR, the
  regressor's condition number;
- :mod:`.gravity`: the identified gravity model (serve G(q) at any g, save/load);
- :mod:`.export`: physically consistent link parameters and the identified URDF.

Imports only the foundation (``arm_dyn_id.config``, ``errors``, ``paths``).
"""
