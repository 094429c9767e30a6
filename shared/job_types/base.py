"""What every job type's schemas build on: inputs ignore unknown fields (callers' snapshots grow
over time), outputs and parameters refuse them (a model's stray field is a validation error the
repair prompt can fix). JSON field names are the legacy system's camelCase."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Input", "NoParams", "Output", "Params"]


class Input(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    """Job types that take no parameters."""
