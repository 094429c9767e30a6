"""The ports the scheduler's services are written against: the unit of work, its transaction, and
one store per aggregate. This package imports no adapter (the import contracts in pyproject.toml
check it); the SQL adapters are :mod:`scheduler_service.sql.uow` and the ``*sql*`` modules, the
in-memory ones ``tests/support/fake_uow.py``."""

from scheduler_service.ports.jobs import JobReads, JobStore, JobSweeps, NewJobRows
from scheduler_service.ports.routes import RouteStore
from scheduler_service.ports.stores import (
    CredentialReveal,
    GateStore,
    ModelKeyStore,
    OutboxStore,
    OutputStore,
    Projection,
    ResultStore,
    SpendStore,
)
from scheduler_service.ports.transaction import Hook, Stores, Transaction, UnitOfWork, Wakeups
from scheduler_service.ports.trees import TreeNodeRow, TreeStore, TreeUsage
from scheduler_service.ports.warmups import WarmupStore

__all__ = [
    "CredentialReveal",
    "GateStore",
    "Hook",
    "JobReads",
    "JobStore",
    "JobSweeps",
    "ModelKeyStore",
    "NewJobRows",
    "OutboxStore",
    "OutputStore",
    "Projection",
    "ResultStore",
    "RouteStore",
    "SpendStore",
    "Stores",
    "Transaction",
    "TreeNodeRow",
    "TreeStore",
    "TreeUsage",
    "UnitOfWork",
    "Wakeups",
    "WarmupStore",
]
