"""Job definitions of the five job types and ``synthetic_echo``
(docs/architecture.md, *Job types*)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

QueueName = Literal["ai-interactive", "ai-background"]
CredentialMode = Literal["platform_key", "user_deepseek_key"]
QUEUES: tuple[str, ...] = ("ai-interactive", "ai-background")
CREDENTIAL_MODES: tuple[str, ...] = ("platform_key", "user_deepseek_key")
#: The mode of jobs that run on their user's own model key.
USER_KEY_MODE = "user_deepseek_key"


@dataclass(frozen=True, slots=True)
class Metadata:
    label: str
    description: str
    domain: Literal["analysis", "generation", "import", "maintenance"]
    version: str


@dataclass(frozen=True, slots=True)
class Routing:
    queue_name: str
    #: 0 is the highest priority, 100 the lowest.
    default_priority: int


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter: attempt n waits uniform(0, min(cap, base·2^(n-1)))."""

    base_ms: int
    cap_ms: int = 300_000


@dataclass(frozen=True, slots=True)
class Execution:
    timeout_ms: int
    #: Retries after the first attempt: maxAttempts = max_retries + 1.
    max_retries: int
    backoff: Backoff
    cancellable: bool = True
    abort_strategy: Literal["fail", "retry"] = "retry"

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1


@dataclass(frozen=True, slots=True)
class SchemaRef:
    version: str


@dataclass(frozen=True, slots=True)
class CredentialPolicy:
    allowed_modes: tuple[str, ...] = ("platform_key", "user_deepseek_key")
    default_mode: str = "platform_key"


@dataclass(frozen=True, slots=True)
class Security:
    content_safety_check: bool = True
    output_redaction: bool = False


@dataclass(frozen=True, slots=True)
class JobDefinition:
    job_type: str
    metadata: Metadata
    routing: Routing
    execution: Execution
    input: SchemaRef
    output: SchemaRef
    prompt_key: str
    prompt_version: str
    projector: str
    credential: CredentialPolicy = field(default_factory=CredentialPolicy)
    security: Security = field(default_factory=Security)
    model_name: str = "deepseek-chat"
    #: Models a create may choose instead of ``model_name`` (same provider).
    allowed_models: tuple[str, ...] = ("deepseek-reasoner",)
    #: The provider whose limits the model's calls spend (with the model and whose key pays).
    model_provider: str = "deepseek"
    #: The answer's token cap, counted against a tokens-per-minute limit before the call.
    max_output_tokens: int = 2_000


# Queue defaults (docs/architecture.md, *Job types*): interactive — 2 attempts, backoff from 2 s;
# background — 3
# attempts, backoff from 5 s.
_INTERACTIVE = {"max_retries": 1, "backoff": Backoff(base_ms=2_000)}
_BACKGROUND = {"max_retries": 2, "backoff": Backoff(base_ms=5_000)}


def _definition(
    job_type: str,
    *,
    label: str,
    description: str,
    domain: Literal["analysis", "generation"],
    queue: str,
    projector: str,
    timeout_ms: int,
) -> JobDefinition:
    policy = _INTERACTIVE if queue == "ai-interactive" else _BACKGROUND
    return JobDefinition(
        job_type=job_type,
        metadata=Metadata(label, description, domain, "1"),
        routing=Routing(queue, 50 if queue == "ai-interactive" else 80),
        execution=Execution(timeout_ms=timeout_ms, **policy),  # type: ignore[arg-type]
        input=SchemaRef("v1"),
        output=SchemaRef("v1"),
        prompt_key=job_type,
        prompt_version="v1",
        projector=projector,
    )


BUILTIN_DEFINITIONS: tuple[JobDefinition, ...] = (
    _definition(
        "learning_state_analysis",
        label="Learning state analysis",
        description="Summarises a learner's state from answers and knowledge points.",
        domain="analysis",
        queue="ai-background",
        projector="learning_analysis",
        timeout_ms=120_000,
    ),
    _definition(
        "weak_point_analysis",
        label="Weak point analysis",
        description="Finds the knowledge points a learner struggles with.",
        domain="analysis",
        queue="ai-background",
        projector="weak_points",
        timeout_ms=120_000,
    ),
    _definition(
        "next_action_planning",
        label="Next action planning",
        description="Recommends a learner's next steps.",
        domain="analysis",
        queue="ai-background",
        projector="next_actions",
        timeout_ms=120_000,
    ),
    _definition(
        "quiz_generation",
        label="Quiz generation",
        description="Generates candidate quiz questions from material.",
        domain="generation",
        queue="ai-interactive",
        projector="quiz_questions",
        timeout_ms=90_000,
    ),
    _definition(
        "flashcard_generation",
        label="Flashcard generation",
        description="Generates candidate flashcards from material.",
        domain="generation",
        queue="ai-interactive",
        projector="flashcards",
        timeout_ms=90_000,
    ),
    JobDefinition(
        job_type="synthetic_echo",
        metadata=Metadata(
            "Synthetic echo", "Echoes its input; tests and benchmarks.", "maintenance", "1"
        ),
        routing=Routing("ai-interactive", 50),
        execution=Execution(timeout_ms=30_000, max_retries=2, backoff=Backoff(base_ms=1_000)),
        input=SchemaRef("v1"),
        output=SchemaRef("v1"),
        prompt_key="synthetic_echo",
        prompt_version="v1",
        projector="echo",
        security=Security(content_safety_check=False),
    ),
)
