"""The job types' schemas by (job type, version), and their models by name: a view of the
catalogue in :mod:`shared.job_types`, where each job type keeps its schemas with its definition
and prompt (docs/architecture.md, *Job types*).

Both sides use them: the scheduler validates a snapshot at create and a result at submit; the
runtime validates the model's answer before it submits.
"""

from __future__ import annotations

from shared.job_types import INPUT_SCHEMAS, OUTPUT_SCHEMAS, PARAMS_SCHEMAS
from shared.job_types.base import NoParams
from shared.job_types.flashcard_generation import FlashcardGenerationOutput, FlashcardParams
from shared.job_types.learning import LearningSnapshot
from shared.job_types.learning_state_analysis import LearningStateAnalysisOutput
from shared.job_types.next_action_planning import NextActionPlanningOutput
from shared.job_types.quiz_generation import QuizGenerationOutput, QuizParams
from shared.job_types.synthetic_echo import EchoInput, EchoOutput, EchoParams
from shared.job_types.weak_point_analysis import WeakPointAnalysisOutput

__all__ = [
    "INPUT_SCHEMAS",
    "OUTPUT_SCHEMAS",
    "PARAMS_SCHEMAS",
    "EchoInput",
    "EchoOutput",
    "EchoParams",
    "FlashcardGenerationOutput",
    "FlashcardParams",
    "LearningSnapshot",
    "LearningStateAnalysisOutput",
    "NextActionPlanningOutput",
    "NoParams",
    "QuizGenerationOutput",
    "QuizParams",
    "WeakPointAnalysisOutput",
]
