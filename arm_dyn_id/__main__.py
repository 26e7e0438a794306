"""Run the command line interface: ``python -m arm_dyn_id ...``."""

from arm_dyn_id.cli import run

run()
