"""quiz_generation: Generates candidate quiz questions from material."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.job_types.base import Output, Params
from shared.job_types.learning import LearningSnapshot
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "QuizGenerationOutput"]

QuestionType = Literal["single_choice", "multiple_choice", "true_false", "short_answer"]


class Choice(Output):
    key: str = Field(min_length=1, max_length=8)
    text: str = Field(min_length=1, max_length=2_000)


class QuizQuestionOut(Output):
    questionType: QuestionType
    stem: str = Field(min_length=1, max_length=5_000)
    choices: list[Choice] = Field(default_factory=list, max_length=10)
    answer: str | list[str] | bool
    explanation: str | None = Field(default=None, max_length=5_000)
    difficulty: Literal["easy", "medium", "hard"] | None = None
    knowledgePointId: str | None = Field(default=None, max_length=191)


class QuizGenerationOutput(Output):
    questions: list[QuizQuestionOut] = Field(min_length=1, max_length=50)


class QuizParams(Params):
    count: int = Field(default=5, ge=1, le=50)
    difficulty: Literal["easy", "medium", "hard", "mixed"] = "mixed"
    questionTypes: list[QuestionType] = Field(
        default_factory=lambda: list[QuestionType](["single_choice"]), min_length=1
    )
    #: The knowledge points (of the snapshot's) the questions are about; empty: any.
    knowledgePointIds: list[str] = Field(default_factory=list, max_length=500)


def split_quiz(
    snapshot: dict[str, Any], params: dict[str, Any], per_call: int
) -> list[dict[str, Any]]:
    """A quiz of more questions than one call should write: children of at most ``per_call``
    questions each, the knowledge points (the params' or the snapshot's) dealt out over them."""
    count = int(params.get("count", 5))
    if per_call <= 0 or count <= per_call:
        return []
    children = -(-count // per_call)
    points = list(params.get("knowledgePointIds") or []) or [
        str(point["id"]) for point in snapshot.get("knowledgePoints") or [] if "id" in point
    ]
    return [
        {
            **params,
            "count": count // children + (1 if index < count % children else 0),
            "knowledgePointIds": (points[index::children] or [points[index % len(points)]])
            if points
            else [],
        }
        for index in range(children)
    ]


def join_quiz(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The children's questions as one set, each question once (by type and stem)."""
    seen: set[tuple[str, str]] = set()
    questions = []
    for output in outputs:
        for question in output.get("questions", []):
            key = (str(question.get("questionType")), " ".join(str(question["stem"]).split()))
            if key not in seen:
                seen.add(key)
                questions.append(question)
    return {"questions": questions[:50]}


def sample_output(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    title = (snapshot.get("material") or {}).get("title", "the material")
    count = int(params.get("count", 5))
    points = list(params.get("knowledgePointIds") or [])
    return {
        "questions": [
            {
                "questionType": "single_choice",
                "stem": f"Question {n + 1} about {title}"
                + (f" ({points[n % len(points)]})?" if points else "?"),
                "choices": [{"key": k, "text": f"Option {k}"} for k in "ABCD"],
                "answer": "A",
                "explanation": "Option A is what the material says.",
                "difficulty": "medium",
                **({"knowledgePointId": points[n % len(points)]} if points else {}),
            }
            for n in range(count)
        ]
    }


SPEC = JobTypeSpec(
    "quiz_generation",
    sample=sample_output,
    label="Quiz generation",
    description="Generates candidate quiz questions from material.",
    domain="generation",
    queue="ai-interactive",
    streams_output=True,
    timeout_ms=90000,
    projector="quiz_questions",
    snapshot=LearningSnapshot,
    params=QuizParams,
    output=QuizGenerationOutput,
    split=split_quiz,
    join=join_quiz,
    instructions=(
        "Write quiz questions about the material, as many as params.count asks for, at the "
        "requested difficulty, about the knowledge points params.knowledgePointIds names (any "
        "when it is empty), each question's knowledgePointId set to the one it tests. Give "
        "choices for choice questions and the correct answer."
    ),
)
