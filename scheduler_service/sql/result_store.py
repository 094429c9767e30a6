"""Accepted outputs on SQL: their business rows and artifacts, in the result's transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.records import ArtifactRow
from scheduler_service.ports import Projection, ResultStore
from scheduler_service.sql import job_queries as queries
from scheduler_service.sql.projection.projectors import JobContext, project_many

__all__ = ["SqlResultStore"]


class SqlResultStore(ResultStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def project_many(self, items: Sequence[Projection]) -> None:
        await project_many(
            self._conn,
            [
                (
                    projector,
                    JobContext(job.id, job.userId, attempt, job.targetType, job.targetId),
                    out,
                )
                for projector, job, attempt, out in items
            ],
        )

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return await queries.artifacts_of(self._conn, job_id)
