"""``python -m aijob.console``: the same as ``aijob console``."""

from __future__ import annotations

import asyncio

from aijob.console.server import serve

if __name__ == "__main__":
    asyncio.run(serve())
