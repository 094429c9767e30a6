"""flashcard_generation: Generates candidate flashcards from material."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.job_types.base import Output, Params
from shared.job_types.learning import LearningSnapshot
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "FlashcardGenerationOutput"]


class Card(Output):
    front: str = Field(min_length=1, max_length=2_000)
    back: str = Field(min_length=1, max_length=5_000)
    hint: str | None = Field(default=None, max_length=1_000)
    knowledgePointId: str | None = Field(default=None, max_length=191)


class FlashcardGenerationOutput(Output):
    cards: list[Card] = Field(min_length=1, max_length=100)


class FlashcardParams(Params):
    count: int = Field(default=10, ge=1, le=100)


def sample_output(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    title = (snapshot.get("material") or {}).get("title", "the material")
    return {
        "cards": [
            {"front": f"{title}: term {n + 1}", "back": f"Definition {n + 1}"}
            for n in range(int(params.get("count", 10)))
        ]
    }


SPEC = JobTypeSpec(
    "flashcard_generation",
    sample=sample_output,
    label="Flashcard generation",
    description="Generates candidate flashcards from material.",
    domain="generation",
    queue="ai-interactive",
    streams_output=True,
    timeout_ms=90000,
    projector="flashcards",
    snapshot=LearningSnapshot,
    params=FlashcardParams,
    output=FlashcardGenerationOutput,
    instructions=(
        "Write flashcards (front, back, optional hint) about the material, as many as "
        "params.count asks for."
    ),
)
