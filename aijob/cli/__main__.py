"""``python -m aijob.cli``."""

import sys

from aijob.cli import main

sys.exit(main())
