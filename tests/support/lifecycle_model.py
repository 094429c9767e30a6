"""A rule-based state machine of the job store's lifecycle against a model, for any store.

Hypothesis drives random sequences of lock, heartbeat, succeed, fail, requeue, cancel request
and cancel confirmation — by the right and the wrong runtime, with the current and stale
attempt numbers — over a few jobs. After every step the rows must be what the model says, and
a refused write must have changed nothing. It runs on MariaDB (tests/db) and on the in-memory
store (tests/services), which interpret the same write table.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from scheduler_service.core.errors import SchedulerError
from scheduler_service.core.records import JobError
from scheduler_service.core.state_machine import LifecycleStatus, legacy_status_of
from tests.support.db import make_job
from tests.support.store import UnitCalls

__all__ = ["lifecycle_machine", "model_settings"]

T = TypeVar("T")
RUNTIMES = st.sampled_from(["rt-a", "rt-b"])
ERROR = JobError("MODEL_TIMEOUT", "The model did not answer in time.", "test")


@dataclass
class Modelled:
    status: str = "queued"
    attempt: int = 0
    holder: str | None = None
    cancel_requested: bool = False
    max_attempts: int = 3


def lifecycle_machine(
    repo: UnitCalls, loop: asyncio.AbstractEventLoop
) -> type[RuleBasedStateMachine]:
    """The machine for ``repo``'s store; its coroutines run on ``loop`` (the test's)."""

    def run(coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=60)

    class Lifecycle(RuleBasedStateMachine):
        jobs = Bundle("jobs")

        def __init__(self) -> None:
            super().__init__()
            self.model: dict[str, Modelled] = {}

        def _attempt(self, job_id: str, stale: bool) -> int:
            return self.model[job_id].attempt - (1 if stale else 0)

        def _holds(self, job_id: str, runtime: str, attempt: int) -> bool:
            job = self.model[job_id]
            return job.status == "running" and job.holder == runtime and job.attempt == attempt

        def _apply(self, expected: bool, call: Coroutine[Any, Any, Any]) -> Any:
            """Run ``call``; it must succeed exactly when the model says so."""
            try:
                outcome = run(call)
            except SchedulerError:
                assert not expected, "the model expected this write to succeed"
                return None
            assert expected, "the model expected this write to be refused"
            return outcome

        @rule(target=jobs)
        def create(self) -> str:
            job = make_job()
            run(repo.create(job))
            job_id = job.job_id
            self.model[job_id] = Modelled()
            return job_id

        @rule(job_id=jobs, runtime=RUNTIMES)
        def lock(self, job_id: str, runtime: str) -> None:
            job = self.model[job_id]
            if self._apply(job.status == "queued", repo.lock(job_id, runtime)) is not None:
                job.status, job.attempt, job.holder = "running", job.attempt + 1, runtime

        @rule(job_id=jobs, runtime=RUNTIMES, stale=st.booleans())
        def heartbeat(self, job_id: str, runtime: str, stale: bool) -> None:
            attempt = self._attempt(job_id, stale)
            outcome = self._apply(
                self._holds(job_id, runtime, attempt),
                repo.extend_lease(job_id, attempt, runtime, progress=10),
            )
            if outcome is not None:
                assert outcome.cancel_requested == self.model[job_id].cancel_requested

        @rule(job_id=jobs, runtime=RUNTIMES, stale=st.booleans())
        def succeed(self, job_id: str, runtime: str, stale: bool) -> None:
            attempt = self._attempt(job_id, stale)
            call = repo.mark_succeeded(
                job_id,
                attempt,
                output_hash="0" * 64,
                result_idempotency_key=f"{job_id}:{attempt}:{'0' * 64}",
                runtime_instance_id=runtime,
            )
            holds = self._holds(job_id, runtime, attempt)
            self._apply(holds, call)
            if holds:
                self._finish(job_id, "succeeded")

        @rule(job_id=jobs, runtime=RUNTIMES, stale=st.booleans())
        def fail(self, job_id: str, runtime: str, stale: bool) -> None:
            attempt = self._attempt(job_id, stale)
            holds = self._holds(job_id, runtime, attempt)
            call = repo.mark_failed(job_id, attempt, ERROR, runtime_instance_id=runtime)
            self._apply(holds, call)
            if holds:
                self._finish(job_id, "failed")

        @rule(job_id=jobs, runtime=RUNTIMES, stale=st.booleans())
        def requeue(self, job_id: str, runtime: str, stale: bool) -> None:
            job = self.model[job_id]
            attempt = self._attempt(job_id, stale)
            allowed = (
                self._holds(job_id, runtime, attempt)
                and job.attempt < job.max_attempts
                and not job.cancel_requested
            )
            self._apply(
                allowed,
                repo.requeue_for_retry(
                    job_id, attempt, ERROR, delay_ms=0, runtime_instance_id=runtime
                ),
            )
            if allowed:
                job.status, job.holder = "queued", None

        @rule(job_id=jobs)
        def request_cancel(self, job_id: str) -> None:
            job = self.model[job_id]
            outcome = self._apply(
                job.status in ("queued", "running"), repo.request_cancellation(job_id)
            )
            if outcome == "cancelled":
                assert job.status == "queued"
                self._finish(job_id, "cancelled")
            elif outcome == "cancel_requested":
                assert job.status == "running"
                job.cancel_requested = True

        @rule(job_id=jobs, stale=st.booleans())
        def confirm_cancel(self, job_id: str, stale: bool) -> None:
            job = self.model[job_id]
            attempt = self._attempt(job_id, stale)
            allowed = job.status == "queued" or (
                job.status == "running" and job.cancel_requested and job.attempt == attempt
            )
            self._apply(allowed, repo.mark_cancelled(job_id, attempt_no=attempt))
            if allowed:
                self._finish(job_id, "cancelled")

        def _finish(self, job_id: str, status: str) -> None:
            job = self.model[job_id]
            job.status, job.holder = status, None

        @invariant()
        def rows_match_the_model(self) -> None:
            for job_id, job in self.model.items():
                row = run(repo.row(job_id))
                assert row["lifecycleStatus"] == job.status, (job_id, row, job)
                legacy = run(repo.legacy_status(job_id))
                if legacy is not None:  # the engine keeps System A's column in step
                    assert legacy == legacy_status_of(LifecycleStatus(job.status))
                assert row["attemptCount"] == job.attempt
                assert (row["cancelRequestedAt"] is not None) == job.cancel_requested
                if job.status == "running":
                    assert row["lockedBy"] == job.holder and row["lockUntil"] is not None
                if job.status == "queued":
                    assert row["lockedBy"] is None
                if job.status in ("succeeded", "failed", "cancelled"):
                    assert row["finishedAt"] is not None and row["lockUntil"] is None

    return Lifecycle


def model_settings(default_examples: int) -> settings:
    """Examples per run (``AIJOB_MODEL_EXAMPLES`` overrides), replayed the same in CI unless
    ``AIJOB_FUZZ_RANDOM`` asks to explore."""
    return settings(
        max_examples=int(os.environ.get("AIJOB_MODEL_EXAMPLES", str(default_examples))),
        stateful_step_count=25,
        deadline=None,
        derandomize=not os.environ.get("AIJOB_FUZZ_RANDOM"),
        suppress_health_check=[HealthCheck.too_slow],
    )
