"""Bring a database to the newest schema with the alembic migrations in ``migrations/``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from scheduler_service.sql.db.engine import create_engine

__all__ = ["alembic_config", "migrate"]


def _migrations_dir() -> Path:
    # Beside the package in a checkout or editable install; in the working directory otherwise
    # (the container image copies migrations/ into its WORKDIR).
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "migrations" / "env.py").is_file():
            return root / "migrations"
    raise FileNotFoundError("migrations/ not found beside the package or in the working directory")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_migrations_dir()))
    return config


async def migrate(database_url: str, revision: str = "head") -> None:
    """Upgrade ``database_url`` to ``revision``; a no-op when it is already there."""
    engine = create_engine(database_url, pool_size=1)

    def upgrade(conn: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade)
    finally:
        await engine.dispose()
