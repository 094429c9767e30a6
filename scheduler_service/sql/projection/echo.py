"""The projector of synthetic_echo: an artifact row only, no business table."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from scheduler_service.sql.projection.base import JobContext, Projector

__all__ = ["PROJECTOR"]


def _echo(_job: JobContext, _out: BaseModel) -> list[dict[str, Any]]:
    return [{}]


PROJECTOR = Projector("echo", "SyntheticEcho", None, _echo)
