"""The smaller stores a transaction holds beside the jobs': each owns its tables and statements.

- :class:`GateStore` (``tx.gates``): the users' gate rows, which serialise a user's creates (caps,
  daily quota) and hold their fair-dispatch places;
- :class:`ModelKeyStore` (``tx.keys``): the model keys' limits and flow state;
- :class:`SpendStore` (``tx.spend``): the usage ledger, each day's spend and the users' budgets;
- :class:`ResultStore` (``tx.results``): the business rows and artifacts of accepted outputs;
- :class:`OutboxStore` (``tx.outbox``): the outbox rows a transaction writes;
- :class:`OutputStore` (``tx.outputs``): the chunks of text attempts write as they go;
- :class:`CredentialReveal`: a user's model key, decrypted, for the runtime that holds its job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from scheduler_service.core.budgets import Budget, Spend, Standing
from scheduler_service.core.events import NewEvent
from scheduler_service.core.model_keys import FlowPolicy, KeyStats, ModelKey, ModelKeyLimits
from scheduler_service.core.output_records import ChunkRow, FeedState, Stored
from scheduler_service.core.records import ArtifactRow, JobRecord, NewJob
from scheduler_service.core.usage import Usage, UsageEntry, UsageLine

__all__ = [
    "CredentialReveal",
    "GateStore",
    "ModelKeyStore",
    "OutboxStore",
    "OutputStore",
    "Projection",
    "ResultStore",
    "SpendStore",
]

#: An accepted output to project: (projector key, job, attempt, validated output).
Projection = tuple[str, JobRecord, int, BaseModel]


class GateStore(ABC):
    @abstractmethod
    async def lock_user_gates(self, user_ids: Collection[str]) -> dict[str, tuple[int, int]]:
        """Serialise these users' creates until commit (their gates locked in one order, so two
        batches cannot deadlock); each one's (active jobs, jobs created today)."""

    @abstractmethod
    async def fair_places(self, jobs: Sequence[NewJob]) -> list[int]:
        """Each new job's place in its user's turn (scheduler_service/core/fairness.py),
        moving the users' gates on to their newest place."""

    @abstractmethod
    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        """Delete up to ``limit`` gate rows created more than ``idle_ms`` ago; how many went.
        A user's next create puts theirs back: the rows only serialise creates."""


class ModelKeyStore(ABC):
    @abstractmethod
    async def congested(self, job: JobRecord, flow: FlowPolicy, retry_after_ms: int | None) -> None:
        """A call of ``job``'s model key met congestion: a 429 (pause the key for
        ``retry_after_ms``) or a 503 (``None``); its concurrency halves."""

    @abstractmethod
    async def paused(self, job: JobRecord, flow: FlowPolicy, pause_ms: int) -> None:
        """The provider said ``job``'s model key has nothing left for ``pause_ms``: no lease on it
        before then (its concurrency is left alone: this is not congestion)."""

    @abstractmethod
    async def answered(
        self, answers: Sequence[tuple[JobRecord, Usage | None]], flow: FlowPolicy
    ) -> None:
        """These jobs' calls answered (with their usage): their keys' windows grow back, or
        shrink when the first tokens came slow."""

    @abstractmethod
    async def put_limits(self, key: ModelKey, limits: ModelKeyLimits) -> None: ...

    @abstractmethod
    async def stats(self, flow: FlowPolicy) -> list[KeyStats]:
        """Every key the fleet knows, with its limits and flow state now."""


class SpendStore(ABC):
    @abstractmethod
    async def record_usages(self, entries: Sequence[UsageEntry]) -> None:
        """The ledger rows of reported calls, their cost added to their users' and keys' spend
        of today."""

    @abstractmethod
    async def budget_standings(
        self, user_ids: Collection[str], budget: Budget, reserving: Collection[str]
    ) -> dict[str, Standing]:
        """Those users with a budget: it, their spend today, and the token estimates of their
        jobs in the ``reserving`` states (core/budgets.py)."""

    @abstractmethod
    async def over_budget(self, user_ids: Collection[str], budget: Budget) -> set[str]:
        """Those users whose spend of today reached their budget."""

    @abstractmethod
    async def over_budget_queued(
        self, budget: Budget, *, limit: int = 100
    ) -> list[tuple[str, str]]:
        """(job id, job type) of queued jobs whose users are over budget today."""

    @abstractmethod
    async def put_budget(self, user_id: str, tokens: int, cost_micros: int) -> None: ...

    @abstractmethod
    async def budget_of(self, user_id: str) -> tuple[int | None, int | None]:
        """The user's own budget (tokens, cost), None where an operator set none."""

    @abstractmethod
    async def spend_today(self, user_id: str) -> Spend: ...

    @abstractmethod
    async def today(self) -> datetime:
        """Midnight (UTC) that began the database's current day."""

    @abstractmethod
    async def usage_report(
        self, user_id: str, start: datetime, end: datetime, user_key_mode: str
    ) -> tuple[UsageLine, dict[ModelKey, UsageLine]]:
        """The user's ledger from ``start`` (inclusive) to ``end`` (exclusive): totals, and the
        same per model key."""


class ResultStore(ABC):
    @abstractmethod
    async def project_many(self, items: Sequence[Projection]) -> None:
        """Write the business rows and artifacts of validated outputs."""

    @abstractmethod
    async def artifacts(self, job_id: str) -> list[ArtifactRow]: ...


class OutboxStore(ABC):
    @abstractmethod
    async def add(self, events: Sequence[NewEvent]) -> None:
        """Write the events' outbox rows in this transaction."""


class CredentialReveal(Protocol):
    async def reveal(self, user_id: str, credential_id: str) -> tuple[str, str]:
        """(api key, provider) of an active credential of ``user_id``."""
        ...


class OutputStore(ABC):
    @abstractmethod
    async def add_chunks(self, chunks: Sequence[ChunkRow]) -> None:
        """Store the chunks; one already stored at the same offset is kept as it is."""

    @abstractmethod
    async def stored_text(
        self, attempts: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], Stored]:
        """What each (job, attempt) has stored: where its text ends, its bytes, its rows."""

    @abstractmethod
    async def chunks_from(self, job_id: str, attempt_no: int, offset: int) -> list[ChunkRow]:
        """The attempt's chunks that end after ``offset``, in offset order."""

    @abstractmethod
    async def feed_states(self, job_ids: Sequence[str]) -> dict[str, FeedState]:
        """Each job's status, current attempt and the end of that attempt's stored text."""

    @abstractmethod
    async def earlier_text(self, job_ids: Collection[str]) -> dict[str, tuple[str | None, str]]:
        """For each job with chunks from an attempt before its current one: the job's last
        error code and the text of the latest such attempt (up to its first gap)."""

    @abstractmethod
    async def prune(self, retention_ms: int, *, limit: int = 500) -> int:
        """Delete the chunks of up to ``limit`` jobs that ended ``retention_ms`` ago or more;
        how many jobs' chunks went."""
