"""The job registry: the built-in definitions, and typed errors for bad ones."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_service.core.errors import (
    DuplicateJobDefinitionError,
    InvalidJobDefinitionError,
    UnknownJobTypeError,
)
from scheduler_service.core.job_definitions import Execution, Routing
from scheduler_service.core.job_registry import BUILTIN_DEFINITIONS, JobRegistry, default_registry

ECHO = next(d for d in BUILTIN_DEFINITIONS if d.job_type == "synthetic_echo")


def test_builtins_register_with_the_design_queues() -> None:
    registry = default_registry()
    assert registry.job_types() == [
        "active-recall",
        "feynman-evaluation",
        "flashcard_generation",
        "learning_state_analysis",
        "next_action_planning",
        "quiz_generation",
        "synthetic_echo",
        "weak_point_analysis",
    ]
    queue = {d.job_type: d.routing.queue_name for d in registry}
    assert queue["quiz_generation"] == queue["flashcard_generation"] == "ai-interactive"
    assert queue["learning_state_analysis"] == "ai-background"
    assert registry.get("quiz_generation").execution.max_attempts == 2
    assert registry.get("weak_point_analysis").execution.max_attempts == 3
    # System A's two, on its ai-analysis queue's terms (ADR-003): 30 s, 3 attempts, from 1 s.
    for legacy in ("active-recall", "feynman-evaluation"):
        definition = registry.get(legacy)
        assert queue[legacy] == "ai-analysis"
        assert definition.execution.timeout_ms == 30_000
        assert definition.execution.max_attempts == 3
        assert definition.execution.backoff.base_ms == 1_000


def test_duplicate_is_refused() -> None:
    with pytest.raises(DuplicateJobDefinitionError):
        JobRegistry([ECHO, ECHO])


@pytest.mark.parametrize(
    "change",
    [
        {"job_type": "Bad-Name"},
        {"job_type": "x"},
        {"routing": Routing("ai-batch", 10)},
        {"execution": dataclasses.replace(ECHO.execution, timeout_ms=999)},
        {"execution": dataclasses.replace(ECHO.execution, timeout_ms=600_001)},
    ],
)
def test_invalid_definitions_are_refused(change: dict[str, object]) -> None:
    with pytest.raises(InvalidJobDefinitionError):
        JobRegistry([dataclasses.replace(ECHO, **change)])  # type: ignore[arg-type]


def test_unknown_job_type() -> None:
    with pytest.raises(UnknownJobTypeError):
        default_registry().get("nope")
    assert isinstance(ECHO.execution, Execution)
