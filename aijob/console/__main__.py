"""``python -m aijob.console``: the same as ``aijob console``."""

from __future__ import annotations

import sys

from aijob.console.server import main

if __name__ == "__main__":
    sys.exit(main())
