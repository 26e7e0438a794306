"""The identification wing: recorded data in, identified model out.

- :mod:`.estimators`: the estimator set (WLS, joint by joint, threshold, IRLS,
  PSO, chunked normal equations) and the held-out model choice;
- :mod:`.pairing`: forward/backward pairing of sweeps (seed 000 eqs. 3-5);
- :mod:`.gravity`: low-speed gravity identification (seed 000);
- :mod:`.full_dynamics`: full dynamics with friction (seed 001);
- :mod:`.payload`: a payload's mass and centre of mass with the arm frozen;
- :mod:`.pipeline`: samples or a read bag in, validated gravity model out (the
  path of ``arm-dyn-id fit`` and of the identifier node).

Imports model, data, validation and the foundation.
"""
