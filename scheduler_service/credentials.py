"""Users' model API keys, encrypted at rest with AES-256-GCM.

The associated data binds each ciphertext to its user, credential id and key version, so a
ciphertext copied to another row or user does not decrypt. Keys are decrypted only for the runtime
that holds a lease on a job using them, and never logged or cached.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Table, insert, select

from scheduler_service.db.clock import db_now
from scheduler_service.db.models import UserModelCredential
from scheduler_service.errors import ConfigurationError, CredentialUnavailableError
from scheduler_service.ids import new_id
from scheduler_service.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["CredentialCipher", "CredentialStore", "CredentialUnavailableError"]

_credentials = cast(Table, UserModelCredential.__table__)
KEY_VERSION = 1


def _aad(user_id: str, credential_id: str, key_version: int) -> bytes:
    return f"{user_id}|{credential_id}|{key_version}".encode()


@dataclass(frozen=True, slots=True)
class CredentialCipher:
    key: bytes

    @classmethod
    def from_base64(cls, value: str) -> CredentialCipher:
        try:
            key = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError("AIJOB_CREDENTIAL_KEY is not base64") from None
        if len(key) != 32:
            raise ConfigurationError("AIJOB_CREDENTIAL_KEY must decode to 32 bytes")
        return cls(key)

    def encrypt(self, user_id: str, credential_id: str, plaintext: str) -> tuple[bytes, bytes]:
        nonce = os.urandom(12)
        sealed = AESGCM(self.key).encrypt(
            nonce, plaintext.encode(), _aad(user_id, credential_id, KEY_VERSION)
        )
        return nonce, sealed

    def decrypt(
        self, user_id: str, credential_id: str, key_version: int, nonce: bytes, sealed: bytes
    ) -> str:
        try:
            plain = AESGCM(self.key).decrypt(
                nonce, sealed, _aad(user_id, credential_id, key_version)
            )
        except InvalidTag:
            raise CredentialUnavailableError("the stored credential cannot be decrypted") from None
        return plain.decode()


class CredentialStore:
    def __init__(self, uow: SqlUnitOfWork, cipher: CredentialCipher | None) -> None:
        self._uow = uow
        self._cipher = cipher

    def _require_cipher(self) -> CredentialCipher:
        if self._cipher is None:
            raise CredentialUnavailableError(
                "no credential key is configured (AIJOB_CREDENTIAL_KEY)"
            )
        return self._cipher

    async def store(
        self, user_id: str, api_key: str, *, label: str = "", provider: str = "deepseek"
    ) -> str:
        """Encrypt and store ``api_key`` for ``user_id``; returns the credential id."""
        cipher = self._require_cipher()
        credential_id = new_id()
        nonce, sealed = cipher.encrypt(user_id, credential_id, api_key)

        async def write(tx: SqlTransaction) -> None:
            await tx.conn.execute(
                insert(_credentials).values(
                    id=credential_id,
                    userId=user_id,
                    provider=provider,
                    label=label or None,
                    ciphertext=sealed,
                    nonce=nonce,
                    keyVersion=KEY_VERSION,
                    keyHint=api_key[-4:] if len(api_key) >= 12 else None,
                    status="active",
                    createdAt=db_now(),
                    updatedAt=db_now(),
                )
            )

        await self._uow.run(write)
        return credential_id

    async def reveal(self, user_id: str, credential_id: str) -> tuple[str, str]:
        """(api key, provider) of an active credential of ``user_id``."""
        cipher = self._require_cipher()
        query = select(_credentials).where(
            _credentials.c.id == credential_id,
            _credentials.c.userId == user_id,
            _credentials.c.status == "active",
        )

        async def read(tx: SqlTransaction) -> Any:
            return (await tx.conn.execute(query)).first()

        row = await self._uow.read(read)
        if row is None:
            raise CredentialUnavailableError("the job's credential does not exist or was revoked")
        key = cipher.decrypt(user_id, credential_id, row.keyVersion, row.nonce, row.ciphertext)
        return key, str(row.provider)
