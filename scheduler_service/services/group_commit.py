"""Group commit of runtime reports: results, failures, heartbeats and output chunks that arrive
together — on one Poll stream or many — are applied in one transaction, with one statement per
table per batch.

Every report keeps its own guard and its own answer. The batch locks its jobs' rows first (in
primary-key order, so two batches never deadlock on each other), judges each report on the locked
row exactly as its unary RPC would, and then writes the accepted ones set-based: one multi-row
SUCCEED, one multi-row insert per business table, for artifacts, usage and the outbox, one
multi-row HEARTBEAT. A stale, duplicate, invalid or conflicting report gets the answer its unary
call would get and never holds back its neighbours. Should the batch transaction itself fail for
a reason that is not one report's (anything but the database being away), each report is applied
again on its own, so one bad report cannot cost the others (docs/architecture.md, *Group
commit*).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from scheduler_service.core import validation
from scheduler_service.core.errors import (
    DatabaseUnavailableError,
    InvalidRequestError,
    JobNotFoundError,
    LeaseLostError,
    SchedulerError,
)
from scheduler_service.core.events import EventType, NewEvent
from scheduler_service.core.guards import Moment, matches, row_of
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.output_records import ChunkRow, Stored
from scheduler_service.core.output_tally import ChunkTally, new_part, partial_output_bytes
from scheduler_service.core.records import Beat, HeartbeatOutcome, JobRecord, LockedRows, Success
from scheduler_service.core.transitions import HEARTBEAT
from scheduler_service.core.trees import SPLIT_TRIGGER
from scheduler_service.core.usage import Usage
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.services import judging, metrics
from scheduler_service.services.gathering import Gathering
from scheduler_service.services.reports import (
    ChunkReport,
    ChunkStored,
    FailedAttempt,
    FailureOutcome,
    FailureReport,
    HeartbeatReport,
    PreparedResult,
    Report,
    ReportAnswer,
    ResultSubmission,
    SubmitOutcome,
    count_accepted,
    count_failure,
    trace_results,
)
from scheduler_service.services.settlement import Settlement
from shared import tracing

__all__ = ["GroupCommit", "ReportBatcher"]

log = logging.getLogger(__name__)


Prepared = PreparedResult | FailedAttempt | HeartbeatReport | ChunkReport


@dataclass
class _Writes:
    """What a batch's accepted reports write, gathered for one statement per table."""

    successes: list[Success]
    projections: list[tuple[str, JobRecord, int, object]]
    usage: list[tuple[JobRecord, int, Usage | None, str | None]]
    events: list[NewEvent]
    beats: dict[int, Beat]
    accepted: list[str]
    succeeded: list[tuple[JobRecord, Usage | None]]
    #: The database's moment the rows were locked and judged at.
    judged_at: datetime
    #: Accepted results (job, attempt, usage), traced once the batch commits.
    traced: list[tuple[JobRecord, int, Usage | None]] = field(default_factory=list)
    #: Output chunks of attempts whose lease holds.
    chunks: list[ChunkRow] = field(default_factory=list)
    #: What the attempts of those chunks have stored, with them.
    stored: dict[tuple[str, int], Stored] = field(default_factory=dict)
    #: Jobs whose first token was told, to their (user, prompt prefix) group: the groups'
    #: held jobs may go.
    warmed: dict[str, tuple[str, str]] = field(default_factory=dict)


class GroupCommit:
    def __init__(
        self,
        settlement: Settlement,
        uow: UnitOfWork,
        registry: JobRegistry,
        flow: FlowPolicy,
        *,
        chunks_per_attempt: int,
        max_output_bytes: int,
    ) -> None:
        self._settlement = settlement
        self._uow = uow
        self._registry = registry
        self._flow = flow
        self._max_output_bytes = max_output_bytes
        #: What each attempt has stored, bounded without a read per chunk.
        self.tally = ChunkTally(
            most_bytes=partial_output_bytes(max_output_bytes), most_rows=chunks_per_attempt
        )

    async def apply(self, reports: Sequence[Report]) -> list[ReportAnswer]:
        """Each report's answer, in order."""
        answers: dict[int, ReportAnswer] = {}
        ready: list[tuple[int, Report, Prepared]] = []
        for index, report in enumerate(reports):
            try:
                ready.append((index, report, self._prepare(report)))
            except SchedulerError as exc:
                answers[index] = exc
        for batch in _rounds(ready):
            answers |= await self._apply_round(batch)
        return [answers[index] for index in range(len(reports))]

    def _prepare(self, report: Report) -> Prepared:
        """The checks that need no database, as the unary RPC runs them."""
        match report:
            case ResultSubmission():
                return judging.prepared_result(report, self._max_output_bytes)
            case FailureReport():
                return self._settlement.failed_attempt(report)
            case ChunkReport():
                judging.check_chunk(report, self._max_output_bytes)
                return report
        judging.check_heartbeat(report)
        return report

    async def _apply_round(
        self, batch: list[tuple[int, Report, Prepared]]
    ) -> dict[int, ReportAnswer]:
        accepted: list[str] = []

        async def round_(tx: Transaction) -> dict[int, ReportAnswer]:
            answers, writes = await self._judge(tx, batch)
            await self._write(tx, writes, answers)
            accepted[:] = writes.accepted
            return answers

        try:
            answers = await self._uow.run(round_)
        except DatabaseUnavailableError as exc:
            return {index: exc for index, _, _ in batch}
        except Exception as exc:
            if len(batch) == 1:  # a report alone: its error is its answer
                return {batch[0][0]: exc}
            log.exception(
                "report batch failed; applying its reports one by one",
                extra={"action": "report_batch_error", "reports": len(batch)},
            )
            alone: dict[int, ReportAnswer] = {}
            for item in batch:
                alone |= await self._apply_round([item])
            return alone
        count_accepted(accepted)
        for answer in answers.values():
            if isinstance(answer, FailureOutcome):
                count_failure(answer)
        return answers

    async def _judge(
        self, tx: Transaction, batch: list[tuple[int, Report, Prepared]]
    ) -> tuple[dict[int, ReportAnswer], _Writes]:
        locked = await tx.reads.lock_rows({report.job_id for _, report, _ in batch})
        answers: dict[int, ReportAnswer] = {}
        writes = _Writes([], [], [], [], {}, [], [], locked.now)
        stored = writes.stored = await self._stored_text(tx, batch)
        for index, report, prepared in batch:
            job = locked.jobs.get(report.job_id)
            try:
                if isinstance(prepared, PreparedResult):
                    answers[index] = self._judge_result(job, prepared, writes)
                elif isinstance(prepared, HeartbeatReport):
                    writes.beats[index] = _judge_beat(job, prepared, locked)
                    if prepared.first_token and job is not None and job.prefixKey:
                        writes.warmed[job.id] = (job.userId, job.prefixKey)
                elif isinstance(prepared, ChunkReport):
                    answers[index] = self._judge_chunk(job, prepared, locked, stored, writes)
                else:
                    # Written at once: failures are few, and each has its own decision.
                    answers[index] = await self._settlement.settle_in(tx, job, prepared)
            except SchedulerError as exc:
                answers[index] = exc
        return answers, writes

    async def _stored_text(
        self, tx: Transaction, batch: list[tuple[int, Report, Prepared]]
    ) -> dict[tuple[str, int], Stored]:
        """What each attempt of the batch's chunks has stored (read for those this replica does
        not know up to the chunk's offset)."""
        attempts = [
            ((p.job_id, p.attempt_no), p.offset) for _, _, p in batch if isinstance(p, ChunkReport)
        ]
        if not attempts:
            return {}
        unknown = self.tally.unknown(attempts)
        if unknown:
            self.tally.known(await tx.outputs.stored_text(unknown))
        return {a: self.tally.of(a) for a, _ in attempts}

    def _judge_chunk(
        self,
        job: JobRecord | None,
        chunk: ChunkReport,
        locked: LockedRows,
        stored: dict[tuple[str, int], Stored],
        writes: _Writes,
    ) -> ChunkStored:
        """A chunk is stored while its attempt's lease holds (the heartbeat's guard), for a type
        that streams its answer, where the attempt's stored text ends and within its bounds."""
        job = _check_lease(job, chunk, locked)
        if not self._registry.streams_output(job.jobType):
            raise InvalidRequestError(
                f"job type {job.jobType!r} does not stream its output", field="chunk"
            )
        attempt = (chunk.job_id, chunk.attempt_no)
        before = stored[attempt]
        new = new_part(before, chunk.offset, chunk.text, self.tally.bounds)
        if new:
            writes.chunks.append(ChunkRow(chunk.job_id, chunk.attempt_no, before.end, new))
            stored[attempt] = before.with_part(new)
        return ChunkStored()

    def _judge_result(
        self, job: JobRecord | None, prepared: PreparedResult, writes: _Writes
    ) -> SubmitOutcome:
        accepted = judging.judged_result(job, prepared, self._registry)
        if accepted is None:
            return SubmitOutcome(prepared.key, duplicate=True)
        sub, job = prepared.submission, accepted.job
        writes.successes.append(
            Success(
                sub.job_id,
                sub.attempt_no,
                sub.runtime_instance_id,
                sub.output_hash,
                prepared.key,
                prepared.output,
            )
        )
        if job.triggerType != SPLIT_TRIGGER:  # a split's outputs are projected at its parent
            writes.projections.append((accepted.projector, job, sub.attempt_no, accepted.validated))
        writes.usage.append((job, sub.attempt_no, self._settlement.priced(job, sub.usage), None))
        writes.events.append(
            NewEvent(
                EventType.COMPLETED,
                job.id,
                job.jobType,
                {"attemptNo": sub.attempt_no},
                job.parentJobId,
            )
        )
        writes.accepted.append(job.id)
        writes.succeeded.append((job, sub.usage))
        writes.traced.append((job, sub.attempt_no, sub.usage))
        return SubmitOutcome(prepared.key, duplicate=False)

    def _chunks_stored(self, chunks: list[ChunkRow], stored: dict[tuple[str, int], Stored]) -> None:
        for attempt, text in stored.items():
            self.tally.stored(attempt, text)
        self._uow.wakeups.output_written(chunks)

    async def _write(
        self, tx: Transaction, writes: _Writes, answers: dict[int, ReportAnswer]
    ) -> None:
        started = tracing.now_ns()
        # Job rows first, then business rows, then the outbox: one lock order for every writer.
        await tx.jobs.succeed_many(writes.successes)
        extended = await tx.jobs.extend_leases(list(writes.beats.values()), writes.judged_at)
        if writes.chunks:
            await tx.outputs.add_chunks(writes.chunks)
            tx.after_commit(
                functools.partial(self._chunks_stored, list(writes.chunks), writes.stored)
            )
        await tx.results.project_many(writes.projections)  # type: ignore[arg-type]
        await tx.spend.record_usages(writes.usage)
        await tx.emit_many(writes.events)
        if writes.succeeded:
            await tx.keys.answered(writes.succeeded, self._flow)
            await self._settlement.answered(tx, [job for job, _ in writes.succeeded])
        for job, _, usage, _ in writes.usage:
            await self._settlement.note_provider_limits(tx, job, usage)
        for index, beat in writes.beats.items():
            answers[index] = extended[beat.job_id]
            tx.job_changed(beat.job_id)
        if writes.warmed and (released := await tx.warmups.release(writes.warmed)):
            tx.after_commit(functools.partial(tx.wakeups.dispatch, tuple(released)))
        if writes.traced and tracing.enabled():
            traced = list(writes.traced)
            tx.after_commit(lambda: trace_results(traced, started))


def _judge_beat(job: JobRecord | None, beat: HeartbeatReport, locked: LockedRows) -> Beat:
    """The HEARTBEAT write's guard (the write table's), judged on the locked row; a miss is a
    lost lease, as the unary write explains it."""
    _check_lease(job, beat, locked)
    return Beat(beat.job_id, beat.attempt_no, beat.runtime_instance_id, beat.progress)


def _check_lease(
    job: JobRecord | None, report: HeartbeatReport | ChunkReport, locked: LockedRows
) -> JobRecord:
    if job is None:
        raise JobNotFoundError(report.job_id)
    params = {
        "attempt": report.attempt_no,
        "holder": report.runtime_instance_id,
        "token": digest(report.lease_token),
    }
    moment = Moment(locked.now, locked.lease_ttl_ms, locked.lease_grace_ms)
    if not matches(HEARTBEAT, row_of(job), params, moment):
        raise LeaseLostError(job.id, report.attempt_no, job.lifecycleStatus)
    return job


def _rounds(
    ready: list[tuple[int, Report, Prepared]],
) -> list[list[tuple[int, Report, Prepared]]]:
    """Split so that a job appears once per round; later reports of a job see earlier ones."""
    rounds: list[list[tuple[int, Report, Prepared]]] = []
    seen: list[set[str]] = []
    chunks = [item for item in ready if isinstance(item[1], ChunkReport)]
    if chunks:
        # Chunks only add rows and come before their attempt's end: they join the first round
        # whatever else their job reports, so a job's chunk and result commit together.
        rounds.append(chunks)
        seen.append(set())
    for item in ready:
        if isinstance(item[1], ChunkReport):
            continue
        job_id = item[1].job_id
        depth = sum(1 for ids in seen if job_id in ids)
        if depth == len(rounds):
            rounds.append([])
            seen.append(set())
        rounds[depth].append(item)
        seen[depth].add(job_id)
    return rounds


class ReportBatcher:
    """Gathers reports for at most ``window_s`` (or ``max_batch`` of them) and applies each
    gathering as one group commit (:class:`~scheduler_service.services.gathering.Gathering`); a lone
    report waits no longer than the window."""

    def __init__(
        self,
        group: GroupCommit,
        *,
        window_s: float,
        max_batch: int,
        max_in_flight: int = 1,
    ) -> None:
        self._group = group
        self._gathering: Gathering[Report, ReportAnswer] = Gathering(
            self._apply, window_s=window_s, max_batch=max_batch, max_in_flight=max_in_flight
        )

    async def submit(self, report: Report) -> ReportAnswer:
        validation.instance_id(report.runtime_instance_id)
        return await self._gathering.submit(report)

    async def heartbeat(self, beat: HeartbeatReport) -> HeartbeatOutcome:
        """A unary Heartbeat: a batch of one in the reports' group commit."""
        outcome = _raised(await self.submit(beat))
        assert isinstance(outcome, HeartbeatOutcome)
        return outcome

    async def submit_result(self, submission: ResultSubmission) -> SubmitOutcome:
        """A unary SubmitResult: a batch of one in the reports' group commit."""
        outcome = _raised(await self.submit(submission))
        assert isinstance(outcome, SubmitOutcome)
        return outcome

    async def submit_failure(self, report: FailureReport) -> FailureOutcome:
        """A unary SubmitFailure: a batch of one in the reports' group commit."""
        outcome = _raised(await self.submit(report))
        assert isinstance(outcome, FailureOutcome)
        return outcome

    def enqueue(self, report: Report) -> asyncio.Future[ReportAnswer]:
        """``report`` joins the gathering; the future is its answer (reports enqueued one after
        another, as a stream's frame is, land in the same batch).

        Whether the caller may act for the report's instance is judged here, in the caller's
        own task: the batch runs in another task, which may hold another token's reports."""
        validation.instance_id(report.runtime_instance_id)
        return self._gathering.enqueue(report)

    async def _apply(self, reports: list[Report]) -> list[ReportAnswer]:
        metrics.REPORT_BATCH.observe(len(reports))
        try:
            return await self._group.apply(reports)
        except Exception as exc:  # every report of the batch gets the failure
            return [exc] * len(reports)

    async def drain(self) -> None:
        """Apply what is waiting and let running batches finish (on shutdown)."""
        await self._gathering.drain()


def _raised(answer: ReportAnswer) -> ReportAnswer:
    """A report's answer as its unary call gives it: the outcome, or the error raised."""
    if isinstance(answer, Exception):
        raise answer
    return answer
