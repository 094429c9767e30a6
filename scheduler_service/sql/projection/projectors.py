"""Projectors, one module per job type's output (its ``PROJECTOR``, or several as ``PROJECTORS``),
each module of this package registered as it is found, looked up by the definition's projector
key (docs/architecture.md, *Results and projection*).

A projector turns a validated output into rows of its business table plus one ``AiJobArtifact``
row each. Row ids are derived from (job, table, ordinal), so projecting the same output twice
collides on the unique keys and is an idempotent success.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel
from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.sql.db.idempotent import insert_ignoring_duplicates
from scheduler_service.sql.db.models import AiJobArtifact
from scheduler_service.sql.projection.base import ArtifactRef, JobContext, Projector, stable_id

__all__ = ["PROJECTORS", "ArtifactRef", "JobContext", "Projector", "project_many", "register"]

_artifacts = cast(Table, AiJobArtifact.__table__)

#: Every projector, by its key.
PROJECTORS: dict[str, Projector] = {}


def register(projector: Projector) -> None:
    """Add a job type's projector (each process does so at import, before serving)."""
    if projector.key in PROJECTORS:
        raise ValueError(f"projector {projector.key!r} registered twice")
    PROJECTORS[projector.key] = projector


def _projectors_of(module_name: str) -> tuple[Projector, ...]:
    module = importlib.import_module(f"scheduler_service.sql.projection.{module_name}")
    if hasattr(module, "PROJECTOR"):
        return (module.PROJECTOR,)
    return tuple(getattr(module, "PROJECTORS", ()))


#: The modules of this package that hold no job type's projector.
_NOT_PROJECTORS = frozenset({"base", "projectors"})

_HERE = [str(Path(__file__).parent)]
for _found in sorted(pkgutil.iter_modules(_HERE), key=lambda found: found.name):
    if _found.name not in _NOT_PROJECTORS:
        for _projector in _projectors_of(_found.name):
            register(_projector)


#: What to project: the projector's key, the job, and the validated output.
Projection = tuple[str, JobContext, BaseModel]


async def project_many(conn: AsyncConnection, items: Sequence[Projection]) -> list[ArtifactRef]:
    """Write the business rows and artifact rows of validated outputs in the caller's
    transaction: one multi-row insert per table (the one projector entry point)."""
    business: dict[Table, list[dict[str, Any]]] = {}
    artifacts: list[dict[str, Any]] = []
    refs: list[ArtifactRef] = []
    for projector_key, job, output in items:
        projector = PROJECTORS[projector_key]
        rows, artifact_rows, job_refs = _rows(projector, job, output)
        if projector.model is not None:
            business.setdefault(cast(Table, projector.model.__table__), []).extend(rows)
        artifacts += artifact_rows
        refs += job_refs
    for table, rows in business.items():
        await insert_ignoring_duplicates(conn, table, rows, later=True)
    await insert_ignoring_duplicates(conn, _artifacts, artifacts, later=True)
    return refs


def _rows(
    projector: Projector, job: JobContext, output: BaseModel
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[ArtifactRef]]:
    business: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    refs: list[ArtifactRef] = []
    for ordinal, fields in enumerate(projector.rows(job, output)):
        row_id = stable_id(job.job_id, projector.artifact_type, ordinal)
        if projector.model is not None:
            row = {**fields, "id": row_id, "jobId": job.job_id, "userId": job.user_id}
            business.append(row | {"ordinal": ordinal} if projector.ordinal else row)
        artifacts.append(
            {
                "id": stable_id(job.job_id, "artifact", projector.artifact_type, ordinal),
                "jobId": job.job_id,
                "attemptNo": job.attempt_no,
                "artifactType": projector.artifact_type,
                "artifactId": row_id,
                "ordinal": ordinal,
            }
        )
        refs.append(ArtifactRef(projector.artifact_type, row_id))
    return business, artifacts, refs
