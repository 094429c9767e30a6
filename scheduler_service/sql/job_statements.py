"""The lifecycle's SQL: prebuilt statements, and the compiler of the declarative write table.

Statements are built once, with bind parameters for what varies: building a statement costs
several times what executing a cached one does (docs/performance.md). A write compiles to

    UPDATE AiAnalysisJob SET <values> WHERE id = :b_id AND (<source 1> OR <source 2> ...)

with one statement per (write, optional guards in use, optional values present).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    case,
    exists,
    func,
    not_,
    or_,
    select,
    update,
)

from scheduler_service.core.cheap_hours import OFF_PEAK
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.records import RECORD_FIELDS
from scheduler_service.core.state_machine import (
    LifecycleStatus,
    Operation,
    legacy_status_of,
    sources_of,
)
from scheduler_service.core.transitions import (
    KEEP_ALIVE,
    LOCK,
    Guard,
    KeepOrNow,
    LifecycleWrite,
    Now,
    Param,
    Plus,
    PlusParam,
    Source,
    Value,
)
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.hints import by_dispatch_index
from scheduler_service.sql.db.legacy_models import AiLegacyJobType
from scheduler_service.sql.db.models import AiJob

__all__ = [
    "LEASED_PER_ROW",
    "LEASED_STAMPED",
    "MOVE_TIER",
    "SELECT_BEFORE_FRESH",
    "SELECT_CLAIMABLE",
    "SELECT_GRANTS",
    "SELECT_RECORD",
    "engine_owned",
    "jobs",
    "leased_fixed",
    "lock_many",
    "not_waiting_for_cheap_hours",
    "overdue",
    "set_shadow_write",
    "shadow_write",
    "status_in",
    "taken_in",
    "write_statement",
]

jobs = cast(Table, AiJob.__table__)
_c = jobs.c
RECORD_COLUMNS = [_c[name] for name in RECORD_FIELDS]
GRANT_COLUMNS = [_c.id, _c.attemptCount, _c.lockUntil, _c.lockedAt, _c.availableAt]


_legacy_types = cast(Table, AiLegacyJobType.__table__)


def engine_owned() -> ColumnElement[bool]:
    """Not a row of a type System A still owns (``AiLegacyJobType``): those are the legacy
    worker's, read by the engine but never claimed, reaped, failed or counted."""
    return _c.jobType.not_in(select(_legacy_types.c.jobType))


def taken_in() -> ColumnElement[bool]:
    """A row the engine can run: every row it creates names its prompt; a row legacy code
    inserted for an adopted type does once the intake has built its snapshot
    (sql/legacy_adoption.py)."""
    return _c.promptVersion.is_not(None)


def not_waiting_for_cheap_hours() -> ColumnElement[bool]:
    """Not an off-peak job that waits out the peak window lasting ``b_defer_ms`` more (0:
    off-peak hours): one waits unless its deadline comes before the window's end plus its
    attempts' time (core/cheap_hours.py)."""
    wait = bindparam("b_defer_ms", type_=Integer)
    return or_(
        _c.costPolicy != OFF_PEAK,
        wait <= 0,
        _c.deadlineAt <= db_now(wait + _c.maxAttempts * _c.timeoutMs),
    )


def status_in(statuses: Iterable[LifecycleStatus]) -> ColumnElement[bool]:
    return _c.lifecycleStatus.in_(sorted(s.value for s in statuses))


def _ms(name: str) -> ColumnElement[int]:
    return bindparam(name, type_=Integer)


def overdue() -> ColumnElement[bool]:
    """Past ``lockUntil`` + grace, or past the attempt's timeout + grace (``b_grace_ms``)."""
    grace = _ms("b_grace_ms")
    return or_(_c.lockUntil < db_now(-grace), _c.startedAt < db_now(-(_c.timeoutMs + grace)))


def _available_now() -> ColumnElement[bool]:
    return and_(_c.availableAt <= db_now(), or_(_c.deadlineAt.is_(None), _c.deadlineAt > db_now()))


_GUARDS: dict[Guard, Callable[[], ColumnElement[bool]]] = {
    Guard.ATTEMPT: lambda: _c.attemptCount == bindparam("b_attempt"),
    Guard.HOLDER: lambda: _c.lockedBy == bindparam("b_holder"),
    Guard.LEASE_TOKEN: lambda: _c.leaseTokenHash == bindparam("b_token"),
    Guard.OWNER: lambda: _c.userId == bindparam("b_owner"),
    Guard.AVAILABLE: _available_now,
    Guard.DEADLINE_PASSED: lambda: and_(_c.deadlineAt.is_not(None), _c.deadlineAt <= db_now()),
    Guard.ATTEMPTS_LEFT: lambda: _c.attemptCount - _c.waivedAttempts < _c.maxAttempts,
    Guard.NO_CANCEL_REQUEST: lambda: _c.cancelRequestedAt.is_(None),
    Guard.CANCEL_REQUESTED: lambda: _c.cancelRequestedAt.is_not(None),
    Guard.WITHIN_GRACE: lambda: _c.lockUntil >= db_now(-_ms("b_grace_ms")),
    Guard.OVERDUE: overdue,
    Guard.NEVER_HEARTBEATED: lambda: _c.lastHeartbeatAt.is_(None),
    Guard.RENEWAL_DUE: lambda: _c.lockUntil < db_now(_ms("b_renew_ms")),
    Guard.CHILDREN_DONE: lambda: _c.childrenOpen == 0,
}


def _value(column: str, value: Value) -> Any:
    match value:
        case Now(offset=None):
            return db_now()
        case Now(offset=str(name)):
            return db_now(_ms(f"b_{name}"))
        case Param(name=name):
            return bindparam(f"v_{name}")
        case Plus(amount=amount):
            return _c[column] + amount
        case PlusParam(name=name):
            return _c[column] + bindparam(f"v_{name}", type_=Integer)
    return _kept(column, value)


def _kept(column: str, value: Value) -> Any:
    match value:
        case KeepOrNow():
            return func.coalesce(_c[column], db_now())
    return value


def _source(source: Source, active: frozenset[Guard]) -> ColumnElement[bool]:
    guards = source.guards | (source.optional & active)
    return and_(_c.lifecycleStatus == source.status.value, *(_GUARDS[g]() for g in sorted(guards)))


#: Whether the legacy ``status`` column is there to keep in step (the expanded schema), or gone
#: (after ``python -m scheduler_service contract``). Set at start-up from the schema.
_shadow = {"status": True}


def shadow_write() -> bool:
    return _shadow["status"]


def set_shadow_write(enabled: bool) -> None:
    """Write the legacy ``status`` beside ``lifecycleStatus`` or not; the statements built so far
    are forgotten so that every write is built again for the schema it runs on."""
    if _shadow["status"] == enabled:
        return
    _shadow["status"] = enabled
    for built in (write_statement, write_many_statement, keep_alive_statement, lock_many):
        built.cache_clear()


def _written(column: str) -> bool:
    return column != "status" or _shadow["status"]


def set_clause(write: LifecycleWrite, present: frozenset[str]) -> dict[str, Any]:
    return {
        column: _value(column, value)
        for column, value in write.all_values.items()
        if _written(column)
        and not (isinstance(value, Param) and value.optional and value.name not in present)
    }


@functools.cache
def write_statement(
    write: LifecycleWrite, active: frozenset[Guard], present: frozenset[str]
) -> Update:
    """``write`` for job ``b_id``, with the optional guards ``active`` and the optional values
    ``present``."""
    where = or_(*(_source(source, active) for source in write.sources))
    return update(jobs).where(_c.id == bindparam("b_id"), where).values(set_clause(write, present))


#: Guards whose compared value differs per row in a multi-row write, by parameter name.
_PER_ROW_GUARDS: dict[Guard, tuple[str, str]] = {
    Guard.ATTEMPT: ("attemptCount", "b_attempt"),
    Guard.HOLDER: ("lockedBy", "b_holder"),
}


@functools.cache
def write_many_statement(
    write: LifecycleWrite, rows: int, active: frozenset[Guard], present: frozenset[str]
) -> Update:
    """``write`` for ``rows`` jobs at once (``i0``, ``i1``...), each with its own guard values
    (``b_attempt0``...) and set values (``v_outputHash0``...): one statement for a batch. Only
    single-source writes; a row whose guard fails is simply not matched (the caller checks the
    count)."""
    (source,) = write.sources
    ids: list[BindParameter[Any]] = [bindparam(f"i{k}") for k in range(rows)]

    def per_row(name: str, column: str) -> Any:
        return case(
            *[
                (_c.id == ids[k], bindparam(f"{name}{k}", type_=_c[column].type))
                for k in range(rows)
            ]
        )

    guards = []
    for guard in sorted(source.guards | (source.optional & active)):
        if guard is Guard.WITHIN_GRACE:
            # Judged on rows this transaction locked, at the moment read with the lock: the
            # write holds the rows to that moment, not to a clock that moved on since.
            guards.append(_c.lockUntil >= bindparam("b_grace_floor", type_=_c.lockUntil.type))
        elif guard in _PER_ROW_GUARDS:
            column, name = _PER_ROW_GUARDS[guard]
            guards.append(_c[column] == per_row(name, column))
        else:
            guards.append(_GUARDS[guard]())
    values = set_clause(write, present)
    for column in values:
        declared = write.all_values[column]
        if isinstance(declared, Param):
            values[column] = per_row(f"v_{declared.name}", column)
        elif isinstance(declared, PlusParam):
            values[column] = _c[column] + per_row(f"v_{declared.name}", column)
    return (
        update(jobs)
        .where(_c.id.in_(ids), _c.lifecycleStatus == source.status.value, *guards)
        .values(values)
    )


@functools.cache
def keep_alive_statement() -> Update:
    """KEEP_ALIVE for every lease held by the runtimes ``b_holders``."""
    (source,) = KEEP_ALIVE.sources
    return (
        update(jobs)
        .where(
            _c.lockedBy.in_(bindparam("b_holders", expanding=True)),
            _c.lifecycleStatus == source.status.value,
            *(_GUARDS[g]() for g in sorted(source.guards)),
        )
        .values(set_clause(KEEP_ALIVE, frozenset()))
    )


@functools.cache
def lock_many(holders: int = 1) -> Update:
    """The lock write for the rows ``b_ids`` (locked FOR UPDATE by the caller). With one holder
    they are leased to ``v_lockedBy`` under ``v_leaseTokenHash``; with several, in one
    statement, the rows ``b_ids{k}`` go to ``v_lockedBy{k}`` under ``v_leaseTokenHash{k}``."""
    values = set_clause(LOCK, frozenset())
    if holders > 1:
        shares: list[BindParameter[Any]] = [
            bindparam(f"b_ids{k}", expanding=True) for k in range(holders)
        ]
        for column in ("lockedBy", "leaseTokenHash"):
            values[column] = case(
                *[
                    (_c.id.in_(share), bindparam(f"v_{column}{k}", type_=_c[column].type))
                    for k, share in enumerate(shares)
                ]
            )
    return (
        update(jobs)
        .where(_c.id.in_(bindparam("b_ids", expanding=True)), status_in(sources_of(Operation.LOCK)))
        .values(values)
    )


SELECT_RECORD = select(*RECORD_COLUMNS).where(_c.id == bindparam("b_id"))
SELECT_RECORDS = select(*RECORD_COLUMNS).where(_c.id.in_(bindparam("b_ids", expanding=True)))
#: The rows of a batch, locked to the end of the transaction, in primary-key order (so two
#: batches lock shared rows in the same order), with the database clock.
SELECT_LOCKED = (
    select(*RECORD_COLUMNS, db_now().label("dbNow"))
    .where(_c.id.in_(bindparam("b_ids", expanding=True)))
    .order_by(_c.id)
    .with_for_update()
)
SELECT_NOW = select(db_now())
LEFT_TO_LEGACY = select(_c.id).where(
    _c.id == bindparam("b_id"), or_(not_(engine_owned()), not_(taken_in()))
)
SELECT_LEASE_STATES = select(_c.id, _c.lockUntil, _c.cancelRequestedAt).where(
    _c.id.in_(bindparam("b_ids", expanding=True))
)
SELECT_GRANTS = select(*GRANT_COLUMNS).where(_c.id.in_(bindparam("b_ids", expanding=True)))
SELECT_GRANT = select(*GRANT_COLUMNS).where(
    _c.id == bindparam("b_id"), _c.lockedBy == bindparam("b_holder")
)
SELECT_LEASE_STATE = select(_c.lockUntil, _c.cancelRequestedAt).where(_c.id == bindparam("b_id"))
SELECT_AVAILABLE_AT = select(_c.availableAt).where(_c.id == bindparam("b_id"))
#: What every new job row starts with, and the columns stamped with the database clock.
_QUEUED_FIXED: dict[str, Any] = {
    "lifecycleStatus": LifecycleStatus.QUEUED.value,
    "status": legacy_status_of(LifecycleStatus.QUEUED),
    "progress": 0,
    "attemptCount": 0,
}
QUEUED_STAMPED = ("queuedAt", "availableAt", "createdAt", "updatedAt")


def queued_fixed() -> dict[str, Any]:
    """What every new job row starts with, on the schema the engine runs on."""
    return {column: value for column, value in _QUEUED_FIXED.items() if _written(column)}


#: A new job written already leased (claims.claim_fresh): the queued row with the lock write
#: applied. Its holder, token digest and ``lockUntil`` come per row.
LEASED_PER_ROW = ("lockedBy", "leaseTokenHash", "lockUntil")
LEASED_STAMPED = (
    *QUEUED_STAMPED,
    *(c for c, v in LOCK.all_values.items() if v == Now() and c not in QUEUED_STAMPED),
)


def leased_fixed() -> dict[str, Any]:
    """What a new job written already leased starts with, on the schema the engine runs on."""
    fixed = dict(_QUEUED_FIXED)
    for column, value in LOCK.all_values.items():
        if isinstance(value, Plus):
            fixed[column] = fixed[column] + value.amount
        elif value is None or isinstance(value, str | int):
            fixed[column] = value
        elif column not in LEASED_PER_ROW and column not in LEASED_STAMPED:
            raise AssertionError(f"the lock write's {column} has no value for a new row")
    return {column: value for column, value in fixed.items() if _written(column)}


def _claimable_where() -> list[ColumnElement[bool]]:
    return [
        status_in(sources_of(Operation.LOCK)),
        _c.jobType.in_(bindparam("b_types", expanding=True)),
        _available_now(),
        engine_owned(),
        taken_in(),
        not_waiting_for_cheap_hours(),
    ]


def _claimable(*extra: ColumnElement[bool], columns: Sequence[Any] = (_c.id,)) -> Select[Any]:
    return by_dispatch_index(
        select(*columns)
        .where(*_claimable_where(), *extra)
        # Users in turn within a priority (core/fairness.py), on idx_fair_dispatch.
        .order_by(_c.priority, _c.fairSeq, _c.createdAt, _c.id)
        .limit(bindparam("b_limit"))
        .with_for_update(skip_locked=True)
    )


SELECT_CLAIMABLE = _claimable()
#: For runtimes not allowed to use user keys (AIJOB_USER_KEY_RUNTIMES).
SELECT_CLAIMABLE_PLATFORM_KEY = _claimable(_c.credentialMode != USER_KEY_MODE)
#: The same with each job's user and model key, for claims under running caps or model limits.
_DETAIL = (
    _c.id,
    _c.userId,
    _c.jobType,
    _c.modelProvider,
    _c.modelName,
    _c.modelTier,
    _c.modelPinned,
    _c.credentialMode,
    _c.credentialId,
    _c.tokenEstimate,
)
#: A claimed job (locked FOR UPDATE by the claim, still queued) leases on another tier of its
#: route (core/routes.py).
MOVE_TIER = (
    update(jobs)
    .where(_c.id.in_(bindparam("b_ids", expanding=True)), status_in(sources_of(Operation.LOCK)))
    .values(
        modelProvider=bindparam("v_modelProvider"),
        modelName=bindparam("v_modelName"),
        modelTier=bindparam("v_modelTier"),
    )
)
SELECT_CLAIMABLE_DETAIL = _claimable(columns=_DETAIL)
SELECT_CLAIMABLE_DETAIL_PLATFORM_KEY = _claimable(
    _c.credentialMode != USER_KEY_MODE, columns=_DETAIL
)
#: Before new jobs are leased as they are written (claims.claim_fresh): the database's clock,
#: whether a queued job of ``b_types`` could be claimed (it goes first), and whether the legacy
#: system owns one of them. Read without locks: a row being claimed elsewhere counts as waiting.
SELECT_BEFORE_FRESH = select(
    db_now().label("dbNow"),
    exists().where(*_claimable_where()).label("waiting"),
    exists()
    .where(_legacy_types.c.jobType.in_(bindparam("b_types", expanding=True)))
    .label("legacy"),
)
#: Running jobs per user, for those users.
SELECT_RUNNING_BY_USER = (
    select(_c.userId, func.count())
    .where(
        _c.lifecycleStatus == LifecycleStatus.RUNNING.value,
        _c.userId.in_(bindparam("b_users", expanding=True)),
    )
    .group_by(_c.userId)
)
