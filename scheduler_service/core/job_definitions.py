"""The scheduler's job definitions: each job type's (shared/job_types/) with its queue's policy
(docs/architecture.md, *Job types*)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shared.job_types import JOB_TYPES, JobTypeSpec
from shared.job_types.reasoning import EFFORTS, OFF
from shared.job_types.spec import Join, Split
from shared.model_catalogue import ALIASES, DEFAULT_MODEL, PRO

QueueName = Literal["ai-interactive", "ai-background", "ai-analysis"]
CredentialMode = Literal["platform_key", "user_deepseek_key"]
QUEUES: tuple[str, ...] = ("ai-interactive", "ai-background", "ai-analysis")
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
class TreePolicy:
    """How a job of the type splits and joins (docs/architecture.md, *Job trees*)."""

    #: Children's params from the job's inputs (created with it); None: it never splits itself.
    split: Split | None = None
    #: The parent's output from its children's (in the scheduler); None: once its children have
    #: ended, the parent runs its own call on a runtime.
    join: Join | None = None
    #: Children running at once (0: no bound); a create may choose another within the limit.
    max_parallel: int = 0
    #: ``all_done``: the share of children that must succeed.
    min_share: float = 0.5


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
    model_name: str = DEFAULT_MODEL
    #: Models a create may choose instead of ``model_name`` (same provider): V4 Pro, and the
    #: names DeepSeek serves with V4 Flash (``deepseek-reasoner`` with thinking).
    allowed_models: tuple[str, ...] = (PRO, *ALIASES)
    #: The provider whose limits the model's calls spend (with the model and whose key pays).
    model_provider: str = "deepseek"
    #: The answer's token cap, counted against a tokens-per-minute limit before the call.
    max_output_tokens: int = 2_000
    #: ``immediate`` or ``off_peak`` (core/cheap_hours.py): a create's default.
    cost_policy: str = "immediate"
    #: Whether a later attempt continues the text an attempt that ended without a result wrote;
    #: the runtime streams the text of such types as it is written.
    resumes: bool = False
    tree: TreePolicy = field(default_factory=TreePolicy)
    #: How much the model thinks by default (shared/reasoning.py), and what a create may ask.
    reasoning: str = OFF
    reasoning_allowed: tuple[str, ...] = EFFORTS


# Queue defaults (docs/architecture.md, *Job types*): interactive — 2 attempts, backoff from 2 s;
# background — 3 attempts, backoff from 5 s; analysis (the legacy system's queue, ADR-003) —
# 3 attempts, backoff from 1 s.
_QUEUE_POLICY = {
    "ai-interactive": {"max_retries": 1, "backoff_ms": 2_000, "priority": 50},
    "ai-background": {"max_retries": 2, "backoff_ms": 5_000, "priority": 80},
    "ai-analysis": {"max_retries": 2, "backoff_ms": 1_000, "priority": 50},
}


def definition_of(spec: JobTypeSpec) -> JobDefinition:
    """The scheduler's definition of a job type (shared/job_types/), its queue's defaults applied
    where the type sets none."""
    policy = _QUEUE_POLICY[spec.queue]
    retries = policy["max_retries"] if spec.max_retries is None else spec.max_retries
    backoff = policy["backoff_ms"] if spec.backoff_base_ms is None else spec.backoff_base_ms
    priority = policy["priority"] if spec.default_priority is None else spec.default_priority
    return JobDefinition(
        job_type=spec.job_type,
        metadata=Metadata(spec.label, spec.description, spec.domain, "1"),
        routing=Routing(spec.queue, priority),
        execution=Execution(
            timeout_ms=spec.timeout_ms, max_retries=retries, backoff=Backoff(base_ms=backoff)
        ),
        input=SchemaRef(spec.version),
        output=SchemaRef(spec.version),
        prompt_key=spec.job_type,
        prompt_version=spec.prompt_version,
        projector=spec.projector,
        security=Security(content_safety_check=spec.content_safety_check),
        cost_policy=spec.cost_policy,
        resumes=spec.streams_output,
        tree=TreePolicy(spec.split, spec.join, spec.max_parallel, spec.join_min_share),
        reasoning=spec.reasoning,
        reasoning_allowed=spec.reasoning_allowed,
    )


def builtin_definitions() -> tuple[JobDefinition, ...]:
    """The definitions of every job type in the catalogue, in its order."""
    return tuple(definition_of(spec) for spec in JOB_TYPES.values())


BUILTIN_DEFINITIONS: tuple[JobDefinition, ...] = builtin_definitions()
