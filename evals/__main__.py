"""`python -m evals`: the grounding evaluation, run from a checkout (it is not part of the wheel)."""

import sys

from evals.cli import main

sys.exit(main())
