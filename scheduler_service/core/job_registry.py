"""The registry: job definitions by type, validated when they are registered (at start-up);
what each job type is and how it runs (the definitions' types are re-exported here).

Behaviour is looked up here, never chosen with a ``switch`` on the job type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from pydantic import BaseModel

from scheduler_service.core.errors import (
    DuplicateJobDefinitionError,
    InvalidJobDefinitionError,
    UnknownJobTypeError,
)
from scheduler_service.core.job_definitions import (
    BUILTIN_DEFINITIONS,
    CREDENTIAL_MODES,
    QUEUES,
    Backoff,
    CredentialPolicy,
    Execution,
    JobDefinition,
    Metadata,
    Routing,
    SchemaRef,
    Security,
    builtin_definitions,
)
from shared.job_types import INPUT_SCHEMAS, OUTPUT_SCHEMAS, PARAMS_SCHEMAS

__all__ = [
    "BUILTIN_DEFINITIONS",
    "Backoff",
    "CredentialPolicy",
    "Execution",
    "JobDefinition",
    "JobRegistry",
    "Metadata",
    "Routing",
    "SchemaRef",
    "Security",
    "default_registry",
]

#: Lower case; hyphens for the legacy system's two types (active-recall, feynman-evaluation), whose
#: names stay.
JOB_TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{1,63}$")
MIN_TIMEOUT_MS, MAX_TIMEOUT_MS = 1_000, 600_000


def validate_definition(definition: JobDefinition) -> None:
    """Raise :class:`InvalidJobDefinitionError` naming the first rule ``definition`` breaks."""
    problems = []
    job_type = definition.job_type
    if not JOB_TYPE_PATTERN.fullmatch(job_type):
        problems.append(f"job type {job_type!r} does not match {JOB_TYPE_PATTERN.pattern}")
    if definition.routing.queue_name not in QUEUES:
        problems.append(f"unknown queue {definition.routing.queue_name!r}")
    if not 0 <= definition.routing.default_priority <= 100:
        problems.append("default priority outside 0-100")
    if not MIN_TIMEOUT_MS <= definition.execution.timeout_ms <= MAX_TIMEOUT_MS:
        problems.append(f"timeout {definition.execution.timeout_ms} ms outside 1 s-600 s")
    if definition.execution.max_retries < 0:
        problems.append("negative max_retries")
    if definition.execution.backoff.base_ms <= 0:
        problems.append("backoff base must be positive")
    modes = definition.credential
    if (
        not set(modes.allowed_modes) <= set(CREDENTIAL_MODES)
        or modes.default_mode not in modes.allowed_modes
    ):
        problems.append("bad credential modes")
    if (job_type, definition.input.version) not in INPUT_SCHEMAS:
        problems.append(f"no input schema {definition.input.version!r}")
    if (job_type, definition.input.version) not in PARAMS_SCHEMAS:
        problems.append(f"no params schema {definition.input.version!r}")
    if (job_type, definition.output.version) not in OUTPUT_SCHEMAS:
        problems.append(f"no output schema {definition.output.version!r}")
    if problems:
        raise InvalidJobDefinitionError(f"job definition {job_type!r}: " + "; ".join(problems))


class JobRegistry:
    def __init__(self, definitions: Iterable[JobDefinition] = ()) -> None:
        self._definitions: dict[str, JobDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: JobDefinition) -> None:
        if definition.job_type in self._definitions:
            raise DuplicateJobDefinitionError(f"job type {definition.job_type!r} registered twice")
        validate_definition(definition)
        self._definitions[definition.job_type] = definition

    def get(self, job_type: str) -> JobDefinition:
        try:
            return self._definitions[job_type]
        except KeyError:
            raise UnknownJobTypeError(job_type, list(self._definitions)) from None

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._definitions

    def streams_output(self, job_type: str) -> bool:
        """Whether jobs of ``job_type`` stream their answer as they write it (and a later
        attempt resumes it)."""
        definition = self._definitions.get(job_type)
        return definition is not None and definition.resumes

    def __iter__(self) -> Iterator[JobDefinition]:
        return iter(self._definitions.values())

    def job_types(self) -> list[str]:
        return sorted(self._definitions)

    def output_schema(self, job_type: str, version: str | None = None) -> type[BaseModel]:
        definition = self.get(job_type)
        return OUTPUT_SCHEMAS[(job_type, version or definition.output.version)]

    def input_schema(self, job_type: str) -> type[BaseModel]:
        definition = self.get(job_type)
        return INPUT_SCHEMAS[(job_type, definition.input.version)]

    def params_schema(self, job_type: str) -> type[BaseModel]:
        definition = self.get(job_type)
        return PARAMS_SCHEMAS[(job_type, definition.input.version)]


def default_registry() -> JobRegistry:
    """Every job type of the catalogue (shared/job_types/), as registered when it is called."""
    return JobRegistry(builtin_definitions())
