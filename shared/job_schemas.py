"""Versioned input and output schemas of the job types, as pydantic models
(docs/architecture.md, *Job types*).

Both sides use them: the scheduler validates a snapshot at create and a result at submit; the
runtime validates the model's answer before it submits. JSON field names are the legacy system's
camelCase. Models refuse unknown fields in outputs (a model's stray field is a validation error
the repair prompt can fix) but ignore them in snapshots (callers' snapshots grow over time).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INPUT_SCHEMAS",
    "OUTPUT_SCHEMAS",
    "PARAMS_SCHEMAS",
    "EchoOutput",
    "FlashcardGenerationOutput",
    "LearningSnapshot",
    "LearningStateAnalysisOutput",
    "NextActionPlanningOutput",
    "QuizGenerationOutput",
    "WeakPointAnalysisOutput",
]


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# -- input: the learning snapshot ---------------------------------------------------------------


class Learner(_Input):
    id: str = Field(min_length=1, max_length=191)
    level: str | None = Field(default=None, max_length=64)
    goals: list[str] = Field(default_factory=list, max_length=20)


class Material(_Input):
    id: str = Field(min_length=1, max_length=191)
    title: str = Field(min_length=1, max_length=500)
    content: str = Field(default="", max_length=200_000)


class KnowledgePoint(_Input):
    id: str = Field(min_length=1, max_length=191)
    name: str = Field(min_length=1, max_length=255)
    mastery: float | None = Field(default=None, ge=0, le=1)


class Answer(_Input):
    questionId: str = Field(min_length=1, max_length=191)
    knowledgePointId: str | None = Field(default=None, max_length=191)
    correct: bool
    response: str = Field(default="", max_length=20_000)


class LearningSnapshot(_Input):
    """What the analysis and generation job types run on (snapshot schema v1)."""

    learner: Learner
    material: Material | None = None
    knowledgePoints: list[KnowledgePoint] = Field(default_factory=list, max_length=500)
    answers: list[Answer] = Field(default_factory=list, max_length=2_000)


class EchoInput(_Input):
    """synthetic_echo takes anything."""

    model_config = ConfigDict(extra="allow")


# -- outputs ------------------------------------------------------------------------------------

Mastery = Literal["novice", "developing", "proficient", "mastered"]
QuestionType = Literal["single_choice", "multiple_choice", "true_false", "short_answer"]
Severity = Literal["low", "medium", "high"]


class LearningStateAnalysisOutput(_Output):
    summary: str = Field(min_length=1, max_length=5_000)
    masteryLevel: Mastery
    strengths: list[str] = Field(default_factory=list, max_length=20)
    weaknesses: list[str] = Field(default_factory=list, max_length=20)


class WeakPoint(_Output):
    knowledgePointId: str | None = Field(default=None, max_length=191)
    title: str = Field(min_length=1, max_length=255)
    reason: str = Field(min_length=1, max_length=5_000)
    severity: Severity
    confidence: int = Field(ge=0, le=100)


class WeakPointAnalysisOutput(_Output):
    weakPoints: list[WeakPoint] = Field(max_length=50)


class NextAction(_Output):
    actionType: Literal["review", "practice", "learn", "rest"]
    title: str = Field(min_length=1, max_length=255)
    reason: str = Field(min_length=1, max_length=5_000)
    knowledgePointId: str | None = Field(default=None, max_length=191)
    priority: int = Field(ge=0, le=100)


class NextActionPlanningOutput(_Output):
    actions: list[NextAction] = Field(min_length=1, max_length=20)


class Choice(_Output):
    key: str = Field(min_length=1, max_length=8)
    text: str = Field(min_length=1, max_length=2_000)


class QuizQuestionOut(_Output):
    questionType: QuestionType
    stem: str = Field(min_length=1, max_length=5_000)
    choices: list[Choice] = Field(default_factory=list, max_length=10)
    answer: str | list[str] | bool
    explanation: str | None = Field(default=None, max_length=5_000)
    difficulty: Literal["easy", "medium", "hard"] | None = None
    knowledgePointId: str | None = Field(default=None, max_length=191)


class QuizGenerationOutput(_Output):
    questions: list[QuizQuestionOut] = Field(min_length=1, max_length=50)


class Card(_Output):
    front: str = Field(min_length=1, max_length=2_000)
    back: str = Field(min_length=1, max_length=5_000)
    hint: str | None = Field(default=None, max_length=1_000)
    knowledgePointId: str | None = Field(default=None, max_length=191)


class FlashcardGenerationOutput(_Output):
    cards: list[Card] = Field(min_length=1, max_length=100)


class EchoOutput(_Output):
    """synthetic_echo returns what it was given under ``echo``."""

    echo: Any = None


#: (jobType, version) -> model. A new version is a new entry; old results stay readable.
OUTPUT_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {
    ("learning_state_analysis", "v1"): LearningStateAnalysisOutput,
    ("weak_point_analysis", "v1"): WeakPointAnalysisOutput,
    ("next_action_planning", "v1"): NextActionPlanningOutput,
    ("quiz_generation", "v1"): QuizGenerationOutput,
    ("flashcard_generation", "v1"): FlashcardGenerationOutput,
    ("synthetic_echo", "v1"): EchoOutput,
}

INPUT_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {
    ("learning_state_analysis", "v1"): LearningSnapshot,
    ("weak_point_analysis", "v1"): LearningSnapshot,
    ("next_action_planning", "v1"): LearningSnapshot,
    ("quiz_generation", "v1"): LearningSnapshot,
    ("flashcard_generation", "v1"): LearningSnapshot,
    ("synthetic_echo", "v1"): EchoInput,
}


# -- parameters ---------------------------------------------------------------------------------


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(_Params):
    """Job types that take no parameters."""


class QuizParams(_Params):
    count: int = Field(default=5, ge=1, le=50)
    difficulty: Literal["easy", "medium", "hard", "mixed"] = "mixed"
    questionTypes: list[QuestionType] = Field(
        default_factory=lambda: list[QuestionType](["single_choice"]), min_length=1
    )


class FlashcardParams(_Params):
    count: int = Field(default=10, ge=1, le=100)


class EchoParams(_Params):
    model_config = ConfigDict(extra="allow")


PARAMS_SCHEMAS: dict[tuple[str, str], type[BaseModel]] = {
    ("learning_state_analysis", "v1"): NoParams,
    ("weak_point_analysis", "v1"): NoParams,
    ("next_action_planning", "v1"): NoParams,
    ("quiz_generation", "v1"): QuizParams,
    ("flashcard_generation", "v1"): FlashcardParams,
    ("synthetic_echo", "v1"): EchoParams,
}
