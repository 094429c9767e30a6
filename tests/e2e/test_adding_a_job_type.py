"""A job type added the documented way (docs/architecture.md, *Adding a job type*) runs end to
end: its module (definition, schemas, prompt), its projector, and the scripted model's answer,
registered through the same functions the built-in types go through; then the real scheduler
on MariaDB, a real runtime over gRPC and the scripted model over HTTP run one of its jobs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from devtools import scripted_model
from devtools.harness import tokens
from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime
from scheduler_service.core.job_registry import default_registry
from scheduler_service.sql.projection import projectors
from scheduler_service.sql.projection.base import JobContext, Projector
from shared import job_types
from shared.job_types.base import Input, NoParams, Output
from shared.job_types.spec import JobTypeSpec
from tests.support.db_checks import ARTIFACTS, count, job_row
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

# -- the toy job type's module (shared/job_types/word_count.py, were it built in) --------------


class WordCountSnapshot(Input):
    text: str = Field(min_length=1, max_length=10_000)


class WordCountOutput(Output):
    words: int = Field(ge=0)


SPEC = JobTypeSpec(
    "word_count",
    label="Word count",
    description="Counts the words of a text.",
    domain="analysis",
    queue="ai-interactive",
    timeout_ms=30_000,
    projector="word_counts",
    snapshot=WordCountSnapshot,
    params=NoParams,
    output=WordCountOutput,
    instructions="Count the words of the snapshot's text.",
)

# -- its projector (scheduler_service/sql/projection/word_counts.py): an artifact, no table --


def _counted(_job: JobContext, _out: BaseModel) -> list[dict[str, Any]]:
    return [{}]


PROJECTOR = Projector("word_counts", "WordCount", None, _counted)


def _answer(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    return {"words": len(str(snapshot.get("text", "")).split())}


@pytest.fixture
def word_count() -> Iterator[None]:
    """The toy type registered as a built-in one is, and taken out again after the test."""
    job_types.register(SPEC)
    projectors.register(PROJECTOR)
    scripted_model.register_answer(SPEC.job_type, _answer)
    try:
        yield
    finally:
        scripted_model.forget_answer(SPEC.job_type)
        projectors.PROJECTORS.pop(PROJECTOR.key)
        job_types.JOB_TYPES.pop(SPEC.job_type)
        for schemas in (job_types.INPUT_SCHEMAS, job_types.PARAMS_SCHEMAS):
            schemas.pop((SPEC.job_type, SPEC.version))
        job_types.OUTPUT_SCHEMAS.pop((SPEC.job_type, SPEC.version))


async def test_a_job_type_added_the_documented_way_runs_end_to_end(
    word_count: None,
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    model_server: ScriptedModelServer,
) -> None:
    # The product's registry, built from the catalogue when the scheduler starts.
    scheduler = await start_scheduler(mysql_url, registry=default_registry())
    assert "word_count" in scheduler.app.registry
    runtime = Runtime(
        RuntimeSettings(
            scheduler_addr=scheduler.address,
            runtime_token=tokens.RUNTIME_TOKEN,
            runtime_instance_id="rt-words",
            runtime_slots=2,
            model_base_url=model_server.base_url,
            heartbeat_s=1,
            drain_grace_s=5,
        )
    )
    stop = asyncio.Event()
    running = asyncio.ensure_future(runtime.run(stop))
    try:
        jobs = JobClient(scheduler.channel)
        created = await jobs.create("word_count", snapshot={"text": "one two three four"})

        async def succeeded() -> bool:
            row = await job_row(scheduler.app.engine, created.job_id)
            return bool(row["lifecycleStatus"] == "succeeded")

        await eventually(succeeded)
    finally:
        stop.set()
        await running
    row = await job_row(scheduler.app.engine, created.job_id)
    assert row["validatedOutput"] == {"words": 4}
    assert await count(scheduler.app.engine, ARTIFACTS, jobId=created.job_id) == 1
