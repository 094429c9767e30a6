"""The job types: one module each (its definition, schemas, prompt and sample output, a
:class:`JobTypeSpec` named ``SPEC``, or several named ``SPECS``), each module of this package
registered here as it is found. Both services read this catalogue: the scheduler's registry and
the runtime's prompts and answer checks. docs/architecture.md, *Adding a job type*, has the
steps."""

from __future__ import annotations

import importlib
import pkgutil

from pydantic import BaseModel

from shared.job_types.spec import JobTypeSpec

__all__ = [
    "INPUT_SCHEMAS",
    "JOB_TYPES",
    "OUTPUT_SCHEMAS",
    "PARAMS_SCHEMAS",
    "JobTypeSpec",
    "register",
    "spec_of",
]

#: Every registered job type, by name.
JOB_TYPES: dict[str, JobTypeSpec] = {}
#: (job type, version) -> schema. A new version is a new entry; old results stay readable.
INPUT_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {}
PARAMS_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {}
OUTPUT_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {}


def register(spec: JobTypeSpec) -> None:
    """Add a job type to the catalogue (each process does so at import, before serving)."""
    if spec.job_type in JOB_TYPES:
        raise ValueError(f"job type {spec.job_type!r} registered twice")
    JOB_TYPES[spec.job_type] = spec
    key = (spec.job_type, spec.version)
    INPUT_SCHEMAS[key] = spec.snapshot
    PARAMS_SCHEMAS[key] = spec.params
    OUTPUT_SCHEMAS[key] = spec.output


def spec_of(job_type: str) -> JobTypeSpec | None:
    return JOB_TYPES.get(job_type)


def _specs_of(module_name: str) -> tuple[JobTypeSpec, ...]:
    module = importlib.import_module(f"{__name__}.{module_name}")
    if hasattr(module, "SPEC"):
        return (module.SPEC,)
    return tuple(getattr(module, "SPECS", ()))


for _found in sorted(pkgutil.iter_modules(__path__), key=lambda found: found.name):
    for _spec in _specs_of(_found.name):
        register(_spec)
