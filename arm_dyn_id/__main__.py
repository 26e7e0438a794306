"""Run the command line interface: ``python -m arm_dyn_id ...``."""

import sys

from arm_dyn_id.cli import main

sys.exit(main())
