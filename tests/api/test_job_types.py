"""Discoverable job types: ListJobTypes answers every type with its JSON Schemas; they
validate the CLI guide's example snapshot and reject a broken one; schemas/ holds the same
schemas and docs/job-types.md's table the same types."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest

from devtools.harness.runtime_client import JobClient
from scheduler_service.core.job_catalog import schema_files
from scheduler_service.core.job_registry import default_registry
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

ROOT = Path(__file__).resolve().parents[2]
CLI_GUIDE = (ROOT / "docs" / "cli.md").read_text()
JOB_TYPES_TABLE = (ROOT / "docs" / "job-types.md").read_text()


async def _job_types(scheduler: RunningScheduler) -> dict[str, job_pb.JobType]:
    client = JobClient(scheduler.channel, "discovering")
    reply = await client.stub.ListJobTypes(
        job_pb.ListJobTypesRequest(), metadata=client.metadata, timeout=30
    )
    return {t.job_type: t for t in reply.job_types}


def _cli_guide_example() -> tuple[str, dict[str, object]]:
    """The job type and snapshot of the CLI guide's `aijob create` example."""
    line = next(line for line in CLI_GUIDE.splitlines() if line.startswith("aijob create "))
    words = shlex.split(line)
    return words[2], json.loads(words[words.index("--snapshot") + 1])


async def test_the_schemas_validate_the_cli_guide_example_and_reject_a_broken_one(
    scheduler: RunningScheduler,
) -> None:
    types = await _job_types(scheduler)
    job_type, snapshot = _cli_guide_example()
    schema = json.loads(types[job_type].snapshot_schema_json)
    jsonschema.validate(snapshot, schema)
    broken = json.loads(json.dumps(snapshot))
    del broken["learner"]["id"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    quiz = types["quiz_generation"]
    assert (quiz.queue_name, quiz.max_attempts, quiz.credential_modes[0]) == (
        "ai-interactive",
        2,
        "platform_key",
    )
    assert "deepseek-reasoner" in quiz.allowed_models
    output = json.loads(quiz.output_schema_json)
    assert output["type"] == "object" and output["title"] == "quiz_generation output"


async def test_the_checked_in_schemas_and_the_job_types_table_match_the_registry(
    scheduler: RunningScheduler,
) -> None:
    types = await _job_types(scheduler)
    files = schema_files(default_registry())
    for name, text in files.items():
        assert (ROOT / "schemas" / name).read_text() == text, name
    served = json.loads(types["synthetic_echo"].snapshot_schema_json)
    assert served == json.loads(files["synthetic_echo.snapshot.schema.json"])
    table = re.findall(r"^\| `([a-z_-]+)` \| (ai-[a-z]+) \|", JOB_TYPES_TABLE, re.MULTILINE)
    registry = {d.job_type: d.routing.queue_name for d in default_registry()}
    assert dict(table) == registry
