"""Valid model outputs for job types other than synthetic_echo, for tests that submit them."""

from __future__ import annotations

from typing import Any

#: A quiz_generation output that its schema accepts.
QUIZ: dict[str, Any] = {
    "questions": [
        {
            "questionType": "single_choice",
            "stem": "Which organelle makes ATP?",
            "choices": [{"key": "A", "text": "Mitochondria"}, {"key": "B", "text": "Nucleus"}],
            "answer": "A",
            "explanation": "Mitochondria make ATP.",
            "difficulty": "easy",
        }
    ]
}
