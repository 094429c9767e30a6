"""What the engine runs an adopted legacy row on (pure): the snapshot built from the row's
``sessionId`` and ``answerId`` and the learner's answer, and the engine's columns the row gets
from its job type's definition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from scheduler_service.core.job_definitions import JobDefinition
from scheduler_service.core.records import JobError
from shared.error_codes import ErrorCode
from shared.job_types.legacy_analysis import ACTIVE_RECALL, FEYNMAN_EVALUATION, AnswerSnapshot

__all__ = [
    "ADOPTABLE",
    "LegacyAnswer",
    "LegacyRow",
    "Snapshot",
    "engine_columns",
    "missing_answer",
    "snapshot_of",
]

#: The job types whose legacy rows the engine can take over: System A's two.
ADOPTABLE = frozenset({ACTIVE_RECALL.job_type, FEYNMAN_EVALUATION.job_type})
#: The target the engine records for the evaluated answer (AiAnalysisResult.answerId).
TARGET_TYPE = "answer"


@dataclass(frozen=True, slots=True)
class LegacyRow:
    job_id: str
    user_id: str
    job_type: str
    session_id: str | None
    answer_id: str | None


@dataclass(frozen=True, slots=True)
class LegacyAnswer:
    question: str | None
    answer: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    content: dict[str, Any]
    schema_version: str


def snapshot_of(
    row: LegacyRow, answer: LegacyAnswer, definition: JobDefinition
) -> Snapshot | JobError:
    """The row's snapshot, or why it cannot have one (an answer past the schema's limits)."""
    try:
        content = AnswerSnapshot(
            sessionId=row.session_id,
            answerId=row.answer_id or "",
            question=answer.question,
            answer=answer.answer,
        ).model_dump(mode="json")
    except ValidationError:
        return JobError(
            ErrorCode.INVALID_SNAPSHOT.value,
            "The learner's answer cannot be evaluated.",
            "the legacy row's answer does not fit the snapshot schema",
        )
    return Snapshot(content, definition.input.version)


def missing_answer(row: LegacyRow) -> JobError:
    internal = (
        "the legacy row names no answer"
        if not row.answer_id
        else "the answer query found no answer for the row's answerId"
    )
    return JobError(
        ErrorCode.LEGACY_ANSWER_NOT_FOUND.value,
        "The answer this job evaluates was not found.",
        internal,
    )


def engine_columns(row: LegacyRow, definition: JobDefinition) -> dict[str, Any]:
    """The columns an adopted row gets, as a create would have set them (its place, lease and
    attempt columns stay: it has never run on the engine)."""
    return {
        "queueName": definition.routing.queue_name,
        "priority": definition.routing.default_priority,
        "maxAttempts": definition.execution.max_attempts,
        "timeoutMs": definition.execution.timeout_ms,
        "triggerType": "legacy",
        "targetType": TARGET_TYPE,
        "targetId": row.answer_id,
        "credentialMode": definition.credential.default_mode,
        "modelProvider": definition.model_provider,
        "modelName": definition.model_name,
        "maxOutputTokens": definition.max_output_tokens,
        "promptKey": definition.prompt_key,
        "promptVersion": definition.prompt_version,
        "inputSchemaVersion": definition.input.version,
        "outputSchemaVersion": definition.output.version,
    }
