"""Secrets the engine keeps in its database (``AiEngineSecret``), made once by whichever replica
asks first and read by every other: a random value inserted if the row is missing, then read
back (two replicas starting together insert one row between them)."""

from __future__ import annotations

import secrets
from typing import cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.db.secret_models import AiEngineSecret

__all__ = ["PROVIDER_USER_ID_KEY", "engine_secret"]

_secrets = cast(Table, AiEngineSecret.__table__)
#: The key of DeepSeek ``user_id`` pseudonyms (core/provider_ids.py) when none is configured.
PROVIDER_USER_ID_KEY = "provider_user_id_key"


async def engine_secret(engine: AsyncEngine, name: str) -> bytes:
    """The secret called ``name`` (48 random bytes, URL-safe base64), made on first use."""
    async with engine.begin() as conn:
        await insert_rows(
            conn,
            _secrets,
            [{"name": name, "secret": secrets.token_urlsafe(48)}],
            ignore_duplicates=True,
        )
    async with engine.connect() as conn:
        found = await conn.scalar(select(_secrets.c.secret).where(_secrets.c.name == name))
    return str(found).encode()
