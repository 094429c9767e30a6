"""ResolveCredential: a user's model key, revealed only to the runtime that holds the job's lease
right now and proves it with the lease's token."""

from __future__ import annotations

from scheduler_service.core import validation
from scheduler_service.core.errors import (
    CredentialUnavailableError,
    LeaseLostError,
    UserKeyNotAllowedError,
)
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.transitions import holds_lease
from scheduler_service.ports import CredentialReveal, UnitOfWork
from scheduler_service.services.user_keys import UserKeyRights

__all__ = ["KeyAccess"]


class KeyAccess:
    def __init__(self, uow: UnitOfWork, user_keys: UserKeyRights) -> None:
        self._uow = uow
        self._user_keys = user_keys

    async def resolve_credential(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        lease_token: str,
        store: CredentialReveal,
    ) -> tuple[str, str]:
        """The user key of a job, for the runtime that holds its lease right now (and proves it
        with the lease's token), and only it."""
        validation.job_id(job_id)
        validation.attempt_no(attempt_no)
        validation.instance_id(runtime_instance_id)
        job = await self._uow.read(lambda tx: tx.reads.get(job_id))
        token_hash = digest(lease_token)
        if job is None or not holds_lease(job, attempt_no, runtime_instance_id, token_hash):
            # The same answer for a missing job, a job leased to someone else and a wrong token.
            raise LeaseLostError(job_id, attempt_no)
        if job.credentialMode == USER_KEY_MODE and not self._user_keys.for_caller(
            runtime_instance_id
        ):
            raise UserKeyNotAllowedError("this runtime is not allowed to run jobs on user keys")
        if job.credentialMode != USER_KEY_MODE or not job.credentialId:
            raise CredentialUnavailableError("the job runs on the platform key")
        return await store.reveal(job.userId, job.credentialId)
