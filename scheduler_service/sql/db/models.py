"""The schema (docs/architecture.md, *Data and migrations*) as typed SQLAlchemy models.

Table and column names are the legacy system's camelCase names, so existing data and tools keep
working; the job table keeps its physical name ``AiAnalysisJob`` (model ``AiJob``). Attribute names
equal column names on purpose: a grep for ``lifecycleStatus`` finds every use.

The migrations in ``migrations/`` build exactly this schema; tests/db/test_migrations.py checks
that they agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.core.events import OutboxStatus
from scheduler_service.core.state_machine import LifecycleStatus, legacy_status_of
from scheduler_service.sql.db.base import ID, MYSQL_TABLE_ARGS, Base, Blob, MediumBlob, Timestamp


class AiJob(Base):
    """One AI job. Only the SQL job store (and the claim) writes ``lifecycleStatus``."""

    __tablename__ = "AiAnalysisJob"
    __table_args__ = (
        Index("AiAnalysisJob_userId_idx", "userId"),
        Index("idx_userId_jobType_createdAt", "userId", "jobType", "createdAt"),
        Index("idx_lifecycleStatus_createdAt", "lifecycleStatus", "createdAt"),
        Index(
            "idx_queueName_lifecycleStatus_createdAt", "queueName", "lifecycleStatus", "createdAt"
        ),
        Index("idx_targetType_targetId", "targetType", "targetId"),
        Index("idx_parentJobId", "parentJobId"),
        Index("idx_rootJobId", "rootJobId"),
        Index(
            "idx_userId_jobType_idempotencyKey", "userId", "jobType", "idempotencyKey", unique=True
        ),
        # The dispatch query: queued jobs by priority, then age (reliability S15).
        Index("idx_dispatch", "lifecycleStatus", "priority", "createdAt", "id"),
        # ... and, within a priority, users in turn (migration 0007).
        Index("idx_fair_dispatch", "lifecycleStatus", "priority", "fairSeq", "createdAt", "id"),
        # The reaper: running jobs by lease deadline, queued jobs by start deadline.
        Index("idx_lifecycleStatus_lockUntil", "lifecycleStatus", "lockUntil"),
        Index("idx_lifecycleStatus_deadlineAt", "lifecycleStatus", "deadlineAt"),
        # CreateJob's per-user counts (active roots, jobs created today) and a user's listing.
        Index("idx_userId_lifecycleStatus_parentJobId", "userId", "lifecycleStatus", "parentJobId"),
        Index("idx_userId_createdAt", "userId", "createdAt"),
        Index("uq_resultIdempotencyKey", "resultIdempotencyKey", unique=True),
        # The contract step's quiet period and the intake of adopted types (migration 0013).
        Index("idx_legacyWrittenAt", "legacyWrittenAt"),
        MYSQL_TABLE_ARGS,
    )

    # The legacy 13 columns; two renamed (completedAt -> finishedAt,
    # errorMessage -> internalErrorMessage).
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    userId: Mapped[str] = mapped_column(String(191))
    sessionId: Mapped[str | None] = mapped_column(String(191))
    answerId: Mapped[str | None] = mapped_column(String(191))
    jobType: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(
        String(32), server_default=legacy_status_of(LifecycleStatus.QUEUED)
    )
    progress: Mapped[int] = mapped_column(Integer, server_default="0")
    internalErrorMessage: Mapped[str | None] = mapped_column(Text)
    queuedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    startedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    finishedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)

    # Identity and routing.
    triggerType: Mapped[str] = mapped_column(String(32), server_default="api")
    queueName: Mapped[str] = mapped_column(String(64), server_default="ai-interactive")
    targetType: Mapped[str | None] = mapped_column(String(32))
    targetId: Mapped[str | None] = mapped_column(String(255))
    parentJobId: Mapped[str | None] = mapped_column(
        ID, ForeignKey("AiAnalysisJob.id", ondelete="SET NULL", name="fk_AiAnalysisJob_parentJobId")
    )
    #: The tree's root (migration 0019); NULL on a root and on a job outside any tree.
    rootJobId: Mapped[str | None] = mapped_column(ID)
    #: 0 for a root, its parent's plus one for a child.
    treeDepth: Mapped[int] = mapped_column(Integer, server_default="0")
    #: A parent's bound on its children running at once (0: none) and its join policy.
    maxParallel: Mapped[int] = mapped_column(Integer, server_default="0")
    joinPolicy: Mapped[str | None] = mapped_column(String(16))
    #: A parent's children, and those not ended yet: the last child to end brings it to 0, in
    #: the transaction that joins the parent.
    childrenTotal: Mapped[int] = mapped_column(Integer, server_default="0")
    childrenOpen: Mapped[int] = mapped_column(Integer, server_default="0")
    #: How much the model thinks (shared/reasoning.py; migration 0021); NULL: off.
    reasoningEffort: Mapped[str | None] = mapped_column(String(8))
    #: A digest of the snapshot its prompt starts with (core/warmup.py; migration 0021).
    prefixKey: Mapped[str | None] = mapped_column(String(32))
    #: When a first token was told for its prefix (the provider stores it; core/warmup.py).
    prefixWarmedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    idempotencyKey: Mapped[str | None] = mapped_column(String(255))
    retriedFromJobId: Mapped[str | None] = mapped_column(String(255))

    # Lifecycle and execution.
    lifecycleStatus: Mapped[str] = mapped_column(
        String(32), server_default=LifecycleStatus.QUEUED.value
    )
    priority: Mapped[int] = mapped_column(Integer, server_default="0")
    lockedBy: Mapped[str | None] = mapped_column(String(100))
    lockedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    lockUntil: Mapped[datetime | None] = mapped_column(Timestamp)
    cancelRequestedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    attemptCount: Mapped[int] = mapped_column(Integer, server_default="0")
    maxAttempts: Mapped[int] = mapped_column(Integer, server_default="3")
    #: Attempts given back unspent (a provider's 429, a runtime shutting down): what counts
    #: against ``maxAttempts`` is ``attemptCount - waivedAttempts``.
    waivedAttempts: Mapped[int] = mapped_column(Integer, server_default="0")
    #: The job's place in its user's turn within its priority (fair dispatch).
    fairSeq: Mapped[int] = mapped_column(BigInteger, server_default="0")
    #: The tokens the job may spend of its model key's per-minute limit (migration 0008); the
    #: key is (modelProvider, modelName, credentialMode).
    tokenEstimate: Mapped[int] = mapped_column(Integer, server_default="0")
    #: The answer's token cap (the definition's, at create); 0: none sent.
    maxOutputTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    #: W3C traceparent of the job's CreateJob span; the lease carries it (shared/tracing.py).
    traceParent: Mapped[str | None] = mapped_column(String(55))
    timeoutMs: Mapped[int] = mapped_column(Integer, server_default="120000")
    availableAt: Mapped[datetime | None] = mapped_column(Timestamp)
    deadlineAt: Mapped[datetime | None] = mapped_column(Timestamp)
    lastHeartbeatAt: Mapped[datetime | None] = mapped_column(Timestamp)
    checkpoint: Mapped[bytes | None] = mapped_column(MediumBlob)
    #: SHA-256 (hex) of the current lease's token; the token itself is never stored.
    leaseTokenHash: Mapped[str | None] = mapped_column(String(64))

    # Input and output.
    inputRef: Mapped[str | None] = mapped_column(String(255))
    inputSchemaVersion: Mapped[str | None] = mapped_column(String(100))
    snapshotId: Mapped[str | None] = mapped_column(String(255))
    promptKey: Mapped[str | None] = mapped_column(String(128))
    promptVersion: Mapped[str | None] = mapped_column(String(100))
    outputSchemaVersion: Mapped[str | None] = mapped_column(String(100))
    requestHash: Mapped[str | None] = mapped_column(String(64))

    # Credential and model.
    credentialMode: Mapped[str] = mapped_column(String(32), server_default="platform_key")
    credentialId: Mapped[str | None] = mapped_column(String(255))
    modelTier: Mapped[str] = mapped_column(String(32), server_default="primary")
    #: The create named the model: its route is that model alone (migration 0022).
    modelPinned: Mapped[bool] = mapped_column(Boolean, server_default="0")
    modelProvider: Mapped[str] = mapped_column(String(32), server_default="deepseek")
    modelName: Mapped[str] = mapped_column(String(64), server_default="deepseek-chat")

    # Errors and output.
    errorCode: Mapped[str | None] = mapped_column(String(100))
    publicErrorMessage: Mapped[str | None] = mapped_column(String(500))
    outputHash: Mapped[str | None] = mapped_column(String(255))
    validatedOutput: Mapped[Any | None] = mapped_column(JSON)
    resultIdempotencyKey: Mapped[str | None] = mapped_column(String(255))
    #: When legacy code last wrote the row; stamped by the shadow-write triggers (migration
    #: 0013), never written by the engine.
    legacyWrittenAt: Mapped[datetime | None] = mapped_column(Timestamp)
    #: ``immediate``, or ``off_peak``: waits for the provider's cheap hours (migration 0014).
    costPolicy: Mapped[str] = mapped_column(String(16), server_default="immediate")


def _job_fk(ondelete: str, name: str) -> ForeignKey:
    return ForeignKey("AiAnalysisJob.id", ondelete=ondelete, name=name)


class AiJobSnapshot(Base):
    """The input a job runs on: the snapshot content and the job parameters."""

    __tablename__ = "AiJobSnapshot"
    __table_args__ = (Index("idx_AiJobSnapshot_jobId", "jobId"), MYSQL_TABLE_ARGS)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_AiJobSnapshot_jobId"))
    schemaVersion: Mapped[str | None] = mapped_column(String(100))
    content: Mapped[Any] = mapped_column(JSON)
    params: Mapped[Any | None] = mapped_column(JSON)
    redactionVersion: Mapped[str | None] = mapped_column(String(32))
    expiresAt: Mapped[datetime | None] = mapped_column(Timestamp)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class AiJobArtifact(Base):
    """A row a projector wrote for a job; unique per (jobId, artifactType, artifactId)."""

    __tablename__ = "AiJobArtifact"
    __table_args__ = (
        UniqueConstraint(
            "jobId", "artifactType", "artifactId", name="uq_AiJobArtifact_job_type_id"
        ),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_AiJobArtifact_jobId"))
    attemptNo: Mapped[int] = mapped_column(Integer)
    artifactType: Mapped[str] = mapped_column(String(64))
    artifactId: Mapped[str] = mapped_column(ID)
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class OutboxEvent(Base):
    """An event written in the same transaction as the state change it announces
    (docs/architecture.md, *The outbox*)."""

    __tablename__ = "OutboxEvent"
    __table_args__ = (
        UniqueConstraint("dedupeKey", name="uq_OutboxEvent_dedupeKey"),
        # The dispatcher's claim query: pending events by availability.
        Index("idx_OutboxEvent_status_availableAt", "status", "availableAt", "id"),
        Index("idx_OutboxEvent_aggregate", "aggregateType", "aggregateId"),
        # Subscribers read the published log in this order (migration 0004 explains why).
        Index("uq_OutboxEvent_publishedSeq", "publishedSeq", unique=True),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    eventType: Mapped[str] = mapped_column(String(64))
    aggregateType: Mapped[str] = mapped_column(String(64))
    aggregateId: Mapped[str] = mapped_column(ID)
    dedupeKey: Mapped[str] = mapped_column(String(255))
    payload: Mapped[Any] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), server_default=OutboxStatus.PENDING.value)
    attemptCount: Mapped[int] = mapped_column(Integer, server_default="0")
    availableAt: Mapped[datetime] = mapped_column(Timestamp)
    lockedBy: Mapped[str | None] = mapped_column(String(100))
    lockedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    publishedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    lastError: Mapped[str | None] = mapped_column(String(500))
    createdAt: Mapped[datetime] = mapped_column(Timestamp)
    publishedSeq: Mapped[int | None] = mapped_column(BigInteger)


class OutboxSequence(Base):
    """The counter that hands out ``publishedSeq``; its row lock orders publication."""

    __tablename__ = "OutboxSequence"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, server_default="0")


class AiUsageLog(Base):
    """One attempt's model usage and cost and its runtime; kept when its job is deleted."""

    __tablename__ = "AiUsageLog"
    __table_args__ = (
        Index("idx_AiUsageLog_jobId", "jobId"),
        Index("idx_AiUsageLog_userId_createdAt", "userId", "createdAt"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str | None] = mapped_column(ID, _job_fk("SET NULL", "fk_AiUsageLog_jobId"))
    userId: Mapped[str | None] = mapped_column(String(191))
    attemptNo: Mapped[int] = mapped_column(Integer, server_default="0")
    jobType: Mapped[str | None] = mapped_column(String(64))
    credentialMode: Mapped[str | None] = mapped_column(String(32))
    modelProvider: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(64))
    promptKey: Mapped[str | None] = mapped_column(String(128))
    promptVersion: Mapped[str | None] = mapped_column(String(100))
    promptTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    completionTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    totalTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    costMicros: Mapped[int] = mapped_column(BigInteger, server_default="0")
    latencyMs: Mapped[int] = mapped_column(Integer, server_default="0")
    #: Time to the first token of a streamed answer, as the runtime measured it.
    firstTokenMs: Mapped[int | None] = mapped_column(Integer)
    #: Prompt tokens served from the provider's context cache (priced lower).
    cachedPromptTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    #: Of completionTokens, those spent reasoning (migration 0021).
    reasoningTokens: Mapped[int] = mapped_column(Integer, server_default="0")
    errorCode: Mapped[str | None] = mapped_column(String(100))
    createdAt: Mapped[datetime] = mapped_column(Timestamp)
    # The window the call's attempt started in and its tokens at the peak rate (0014).
    atPeak: Mapped[bool] = mapped_column(Boolean, server_default="0")
    peakCostMicros: Mapped[int | None] = mapped_column(BigInteger)
    runtimeInstanceId: Mapped[str | None] = mapped_column(String(100))
    #: The route tier the attempt ran on (migration 0022).
    modelTier: Mapped[str | None] = mapped_column(String(32))


class UserModelCredential(Base):
    """A user's model API key, encrypted at rest (AES-GCM, associated data binds it to the user)."""

    __tablename__ = "UserModelCredential"
    __table_args__ = (Index("idx_UserModelCredential_userId", "userId"), MYSQL_TABLE_ARGS)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    userId: Mapped[str] = mapped_column(String(191))
    provider: Mapped[str] = mapped_column(String(32), server_default="deepseek")
    label: Mapped[str | None] = mapped_column(String(100))
    ciphertext: Mapped[bytes] = mapped_column(Blob)
    nonce: Mapped[bytes] = mapped_column(Blob)
    keyVersion: Mapped[int] = mapped_column(Integer, server_default="1")
    keyHint: Mapped[str | None] = mapped_column(String(8))
    status: Mapped[str] = mapped_column(String(16), server_default="active")
    createdAt: Mapped[datetime] = mapped_column(Timestamp)
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)
    revokedAt: Mapped[datetime | None] = mapped_column(Timestamp)


def _output_table_args(name: str) -> tuple[Any, ...]:
    return (
        UniqueConstraint("jobId", "ordinal", name=f"uq_{name}_jobId_ordinal"),
        Index(f"idx_{name}_userId_createdAt", "userId", "createdAt"),
        MYSQL_TABLE_ARGS,
    )


class AiLearningAnalysis(Base):
    """learning_state_analysis output: one analysis of a learner's state."""

    __tablename__ = "AiLearningAnalysis"
    __table_args__ = _output_table_args("AiLearningAnalysis")

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_AiLearningAnalysis_jobId"))
    userId: Mapped[str] = mapped_column(String(191))
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    targetType: Mapped[str | None] = mapped_column(String(32))
    targetId: Mapped[str | None] = mapped_column(String(255))
    summary: Mapped[str] = mapped_column(Text)
    masteryLevel: Mapped[str | None] = mapped_column(String(32))
    strengths: Mapped[Any | None] = mapped_column(JSON)
    weaknesses: Mapped[Any | None] = mapped_column(JSON)
    details: Mapped[Any | None] = mapped_column(JSON)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class WeakPointCandidate(Base):
    """weak_point_analysis output: one suspected weak point."""

    __tablename__ = "WeakPointCandidate"
    __table_args__ = _output_table_args("WeakPointCandidate")

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_WeakPointCandidate_jobId"))
    userId: Mapped[str] = mapped_column(String(191))
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    knowledgePointId: Mapped[str | None] = mapped_column(String(191))
    title: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str] = mapped_column(Text)
    severity: Mapped[str | None] = mapped_column(String(16))
    confidence: Mapped[int | None] = mapped_column(Integer)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class NextActionRecommendation(Base):
    """next_action_planning output: one recommended next step."""

    __tablename__ = "NextActionRecommendation"
    __table_args__ = _output_table_args("NextActionRecommendation")

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_NextActionRecommendation_jobId"))
    userId: Mapped[str] = mapped_column(String(191))
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    actionType: Mapped[str] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str] = mapped_column(Text)
    knowledgePointId: Mapped[str | None] = mapped_column(String(191))
    priority: Mapped[int] = mapped_column(Integer, server_default="0")
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class QuizQuestion(Base):
    """quiz_generation output: one candidate question."""

    __tablename__ = "QuizQuestion"
    __table_args__ = _output_table_args("QuizQuestion")

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_QuizQuestion_jobId"))
    userId: Mapped[str] = mapped_column(String(191))
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    questionType: Mapped[str] = mapped_column(String(32))
    stem: Mapped[str] = mapped_column(Text)
    choices: Mapped[Any | None] = mapped_column(JSON)
    answer: Mapped[Any] = mapped_column(JSON)
    explanation: Mapped[str | None] = mapped_column(Text)
    difficulty: Mapped[str | None] = mapped_column(String(16))
    knowledgePointId: Mapped[str | None] = mapped_column(String(191))
    status: Mapped[str] = mapped_column(String(16), server_default="candidate")
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class Flashcard(Base):
    """flashcard_generation output: one candidate card."""

    __tablename__ = "Flashcard"
    __table_args__ = _output_table_args("Flashcard")

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID, _job_fk("CASCADE", "fk_Flashcard_jobId"))
    userId: Mapped[str] = mapped_column(String(191))
    ordinal: Mapped[int] = mapped_column(Integer, server_default="0")
    front: Mapped[str] = mapped_column(Text)
    back: Mapped[str] = mapped_column(Text)
    hint: Mapped[str | None] = mapped_column(Text)
    knowledgePointId: Mapped[str | None] = mapped_column(String(191))
    status: Mapped[str] = mapped_column(String(16), server_default="candidate")
    createdAt: Mapped[datetime] = mapped_column(Timestamp)


class AiUserJobGate(Base):
    """One row per user, locked by CreateJob so that per-user caps hold under concurrency.

    "At most N active jobs" spans many rows; a snapshot cannot guard it (docs/architecture.md,
    *Data and migrations*), so
    creates for one user serialise on this row while they count.
    """

    __tablename__ = "AiUserJobGate"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    userId: Mapped[str] = mapped_column(String(191), primary_key=True)
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)
    #: The fair-dispatch place of this user's newest job; NULL before their first.
    fairSeq: Mapped[int | None] = mapped_column(BigInteger)


class AiModelKey(Base):
    """One model key (provider, model, whose key pays): the limits an operator set (NULL takes
    the settings' default) and the flow-control state every replica's claim reads under this
    row's lock (scheduler_service/core/model_keys.py)."""

    __tablename__ = "AiModelKey"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    credentialScope: Mapped[str] = mapped_column(String(16), primary_key=True)
    maxConcurrency: Mapped[int | None] = mapped_column(Integer)
    maxConcurrencyPerUser: Mapped[int | None] = mapped_column(Integer)  # one user's calls at once
    requestsPerMinute: Mapped[int | None] = mapped_column(Integer)
    tokensPerMinute: Mapped[int | None] = mapped_column(BigInteger)
    pausedUntil: Mapped[datetime | None] = mapped_column(Timestamp)
    effectiveConcurrency: Mapped[float | None] = mapped_column(Float)
    #: Per-second counts of the last minute, JSON [[second, amount], ...] (core/model_keys.py).
    requestWindow: Mapped[str | None] = mapped_column(Text)
    tokenWindow: Mapped[str | None] = mapped_column(Text)
    rateLimitedWindow: Mapped[str | None] = mapped_column(Text)
    rateLimitedTotal: Mapped[int] = mapped_column(BigInteger, server_default="0")
    #: Slow start below it, additive growth above (core/model_keys.py); each decrease sets it.
    growthThreshold: Mapped[float | None] = mapped_column(Float)
    #: Fastest first token per minute of the last few, JSON [[minute, ms], ...].
    firstTokenWindow: Mapped[str | None] = mapped_column(Text)
    decreasedAt: Mapped[datetime | None] = mapped_column(Timestamp)
    #: A platform-wide cap on what the key may cost per UTC day (NULL: the default; 0: none),
    #: and what it cost on ``costDay``.
    dailyCostMicros: Mapped[int | None] = mapped_column(BigInteger)
    costDay: Mapped[datetime | None] = mapped_column(Timestamp)
    costToday: Mapped[int] = mapped_column(BigInteger, server_default="0")
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)


# Tables in modules of their own, imported so that Base.metadata always holds them.
from scheduler_service.sql.db import (  # noqa: E402, F401
    audit_models,
    legacy_models,
    output_models,
    route_models,
    secret_models,
    spend_models,
)
