"""The job types as callers see them: routing, limits and JSON Schemas. Pure.

``JobService.ListJobTypes`` answers this, and ``make proto`` writes the same schemas to
``schemas/`` (checked in CI), so a caller in any language can validate a snapshot before it
sends one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scheduler_service.core.job_definitions import JobDefinition
from scheduler_service.core.job_registry import JobRegistry

__all__ = ["JobTypeInfo", "describe", "schema_files"]


@dataclass(frozen=True, slots=True)
class JobTypeInfo:
    definition: JobDefinition
    input_schema: dict[str, Any]
    params_schema: dict[str, Any]
    output_schema: dict[str, Any]


def _schema(model: Any, title: str) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = title
    return schema


def describe(registry: JobRegistry) -> list[JobTypeInfo]:
    """Every registered job type, by name."""
    return [
        JobTypeInfo(
            definition,
            _schema(registry.input_schema(d.job_type), f"{d.job_type} snapshot"),
            _schema(registry.params_schema(d.job_type), f"{d.job_type} params"),
            _schema(registry.output_schema(d.job_type), f"{d.job_type} output"),
        )
        for d in sorted(registry, key=lambda d: d.job_type)
        for definition in (d,)
    ]


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schema_files(registry: JobRegistry) -> dict[str, str]:
    """``<job type>.<snapshot|params|output>.schema.json`` -> its text."""
    files: dict[str, str] = {}
    for info in describe(registry):
        name = info.definition.job_type
        files[f"{name}.snapshot.schema.json"] = schema_text(info.input_schema)
        files[f"{name}.params.schema.json"] = schema_text(info.params_schema)
        files[f"{name}.output.schema.json"] = schema_text(info.output_schema)
    return files
