"""The projector of flashcard_generation: its outputs as ``Flashcard`` rows."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.models import Flashcard
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.flashcard_generation import FlashcardGenerationOutput

__all__ = ["PROJECTOR"]


def _cards(_job: JobContext, out: FlashcardGenerationOutput) -> list[dict[str, Any]]:
    return [c.model_dump() for c in out.cards]


PROJECTOR = Projector("flashcards", "Flashcard", Flashcard, _cards)
