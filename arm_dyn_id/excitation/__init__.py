"""The excitation wing: how the arm is moved to make its parameters visible.

- :mod:`.plans`: reciprocating sweeps (seed 000) and Fourier series (seed 001)
  as analytic plans, with limit checks;
- :mod:`.design`: optimal static poses and Fourier coefficients as problems (seed
  000 eqs. 12-17, seed 001 eqs. 8-10), solved by the generic optimisers of
  :mod:`arm_dyn_id.optimisers`;
- :mod:`.collision`: clearance between links and with the environment;
- :mod:`.follow`: streaming a plan to an arm and watching that it follows.

Imports the model wing and the foundation only.
"""
