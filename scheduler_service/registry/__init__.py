"""The job-definition registry: what each job type is and how it runs. Pure data, no I/O."""

from scheduler_service.registry.definitions import (
    BUILTIN_DEFINITIONS,
    Backoff,
    CredentialPolicy,
    Execution,
    JobDefinition,
    Metadata,
    Routing,
    SchemaRef,
    Security,
)
from scheduler_service.registry.registry import JobRegistry, default_registry

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
