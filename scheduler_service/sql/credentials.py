"""Users' model API keys, encrypted at rest with AES-256-GCM.

The associated data binds each ciphertext to its user, credential id and key version, so a
ciphertext copied to another row or user does not decrypt. Keys are decrypted only for the runtime
that holds a lease on a job using them, and never logged or cached.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Table, insert, select, update

from scheduler_service.core.errors import (
    ConfigurationError,
    CredentialRevokedError,
    CredentialUnavailableError,
    InvalidRequestError,
    UnknownCredentialError,
)
from scheduler_service.core.ids import new_id
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import UserModelCredential
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork
from shared.error_codes import ErrorCode

__all__ = [
    "CredentialCipher",
    "CredentialRevokedError",
    "CredentialStore",
    "CredentialUnavailableError",
    "StoredCredential",
    "checked_api_key",
    "hint_of",
]

_credentials = cast(Table, UserModelCredential.__table__)
#: What an API key may look like: printable ASCII without spaces, as providers issue them.
_KEY_SHAPE = re.compile(r"[A-Za-z0-9._\-]{20,256}")
#: Providers whose keys this engine can call with, and the prefix their keys carry.
PROVIDER_KEY_PREFIXES = {"deepseek": "sk-"}
ACTIVE, DELETED = "active", "deleted"


def _aad(user_id: str, credential_id: str, key_version: int) -> bytes:
    return f"{user_id}|{credential_id}|{key_version}".encode()


def _decoded(value: str, name: str) -> bytes:
    try:
        key = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"{name} is not base64") from None
    if len(key) != 32:
        raise ConfigurationError(f"{name} must decode to 32 bytes")
    return key


@dataclass(frozen=True, slots=True)
class CredentialCipher:
    """The encryption keys by version: the newest encrypts, every one still decrypts what it
    encrypted (so a new key can be added, rows re-encrypted, then the old one retired)."""

    keys: Mapping[int, bytes]

    @classmethod
    def from_base64(cls, value: str, version: int = 1) -> CredentialCipher:
        return cls({version: _decoded(value, "AIJOB_CREDENTIAL_KEY")})

    @classmethod
    def from_settings(cls, key: str, keys: str) -> CredentialCipher | None:
        """``AIJOB_CREDENTIAL_KEY`` (version 1) and ``AIJOB_CREDENTIAL_KEYS`` (``version=base64``
        pairs, comma-separated); None when neither is set."""
        found: dict[int, bytes] = {}
        if key.strip():
            found[1] = _decoded(key, "AIJOB_CREDENTIAL_KEY")
        for pair in filter(None, (p.strip() for p in keys.split(","))):
            version, sep, value = pair.partition("=")
            if not sep or not version.strip().isdigit() or int(version) < 1:
                raise ConfigurationError("AIJOB_CREDENTIAL_KEYS takes version=base64 pairs")
            if int(version) in found:
                raise ConfigurationError(f"credential key version {int(version)} is set twice")
            found[int(version)] = _decoded(value, f"AIJOB_CREDENTIAL_KEYS version {version}")
        return cls(found) if found else None

    @property
    def newest(self) -> int:
        return max(self.keys)

    def encrypt(self, user_id: str, credential_id: str, plaintext: str) -> tuple[int, bytes, bytes]:
        """(key version, nonce, ciphertext) under the newest key."""
        version, nonce = self.newest, os.urandom(12)
        sealed = AESGCM(self.keys[version]).encrypt(
            nonce, plaintext.encode(), _aad(user_id, credential_id, version)
        )
        return version, nonce, sealed

    def decrypt(
        self, user_id: str, credential_id: str, key_version: int, nonce: bytes, sealed: bytes
    ) -> str:
        key = self.keys.get(key_version)
        if key is None:
            raise CredentialUnavailableError(
                f"credential key version {key_version} is not configured"
            )
        try:
            plain = AESGCM(key).decrypt(nonce, sealed, _aad(user_id, credential_id, key_version))
        except InvalidTag:
            raise CredentialUnavailableError("the stored credential cannot be decrypted") from None
        return plain.decode()


def checked_api_key(provider: str, api_key: str) -> str:
    """The key, if it has the shape ``provider``'s keys have (the key itself is never echoed)."""
    prefix = PROVIDER_KEY_PREFIXES.get(provider)
    if prefix is None:
        known = ", ".join(sorted(PROVIDER_KEY_PREFIXES))
        raise InvalidRequestError(f"provider must be one of: {known}", field="provider")
    if not _KEY_SHAPE.fullmatch(api_key) or not api_key.startswith(prefix):
        raise InvalidRequestError(
            f"api_key does not look like a {provider} key ({prefix}..., 20 to 256 letters, "
            "digits, dots, dashes or underscores)",
            field="api_key",
            code=ErrorCode.INVALID_CREDENTIAL,
        )
    return api_key


def hint_of(provider: str, last4: str | None) -> str:
    """A masked key, as dashboards show one: ``sk-...abcd``."""
    return f"{PROVIDER_KEY_PREFIXES.get(provider, '')}...{last4 or '****'}"


@dataclass(frozen=True, slots=True)
class StoredCredential:
    credential_id: str
    provider: str
    hint: str
    label: str
    created_at: datetime


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
        version, nonce, sealed = cipher.encrypt(user_id, credential_id, api_key)

        async def write(tx: SqlTransaction) -> None:
            await tx.conn.execute(
                insert(_credentials).values(
                    id=credential_id,
                    userId=user_id,
                    provider=provider,
                    label=label or None,
                    ciphertext=sealed,
                    nonce=nonce,
                    keyVersion=version,
                    keyHint=api_key[-4:] if len(api_key) >= 12 else None,
                    status=ACTIVE,
                    createdAt=db_now(),
                    updatedAt=db_now(),
                )
            )

        await self._uow.run(write)
        return credential_id

    async def listed(self, user_id: str) -> list[StoredCredential]:
        """The user's active credentials, masked, oldest first."""
        query = (
            select(_credentials)
            .where(_credentials.c.userId == user_id, _credentials.c.status == ACTIVE)
            .order_by(_credentials.c.createdAt, _credentials.c.id)
        )
        rows = await self._uow.read(lambda tx: _all(tx, query))
        return [
            StoredCredential(
                row.id,
                row.provider,
                hint_of(row.provider, row.keyHint),
                row.label or "",
                row.createdAt,
            )
            for row in rows
        ]

    async def delete(self, user_id: str, credential_id: str) -> None:
        """Delete one of the user's credentials: the ciphertext is wiped, the row stays (its
        jobs' history names it)."""
        statement = (
            update(_credentials)
            .where(
                _credentials.c.id == credential_id,
                _credentials.c.userId == user_id,
                _credentials.c.status == ACTIVE,
            )
            .values(
                status=DELETED, ciphertext=b"", nonce=b"", revokedAt=db_now(), updatedAt=db_now()
            )
        )

        async def write(tx: SqlTransaction) -> int:
            return int((await tx.conn.execute(statement)).rowcount)

        if await self._uow.run(write) != 1:
            raise UnknownCredentialError("no such credential")

    async def reveal(self, user_id: str, credential_id: str) -> tuple[str, str]:
        """(api key, provider) of an active credential of ``user_id``."""
        cipher = self._require_cipher()
        query = select(_credentials).where(
            _credentials.c.id == credential_id,
            _credentials.c.userId == user_id,
            _credentials.c.status == ACTIVE,
        )

        async def read(tx: SqlTransaction) -> Any:
            return (await tx.conn.execute(query)).first()

        row = await self._uow.read(read)
        if row is None:
            raise CredentialRevokedError("the job's credential does not exist or was deleted")
        key = cipher.decrypt(user_id, credential_id, row.keyVersion, row.nonce, row.ciphertext)
        return key, str(row.provider)

    async def reencrypt_all(self, *, batch: int = 200) -> tuple[int, int]:
        """Re-encrypt every active credential not under the newest key: how many were, and the
        newest key's version. Each row
        moves with a guarded UPDATE (its old version in the WHERE), so a concurrent run or
        delete is never overwritten."""
        cipher = self._require_cipher()
        newest, moved = cipher.newest, 0
        stale = (
            select(_credentials)
            .where(_credentials.c.status == ACTIVE, _credentials.c.keyVersion != newest)
            .order_by(_credentials.c.id)
            .limit(batch)
        )
        while rows := await self._uow.read(lambda tx: _all(tx, stale)):
            for row in rows:
                plain = cipher.decrypt(
                    row.userId, row.id, row.keyVersion, row.nonce, row.ciphertext
                )
                sealed = cipher.encrypt(row.userId, row.id, plain)
                moved += await self._uow.run(functools.partial(_moved, row=row, sealed=sealed))
        return moved, newest


async def _all(tx: SqlTransaction, query: Any) -> list[Any]:
    return list(await tx.conn.execute(query))


async def _moved(tx: SqlTransaction, *, row: Any, sealed: tuple[int, bytes, bytes]) -> int:
    version, nonce, ciphertext = sealed
    result = await tx.conn.execute(
        update(_credentials)
        .where(
            _credentials.c.id == row.id,
            _credentials.c.keyVersion == row.keyVersion,
            _credentials.c.status == ACTIVE,
        )
        .values(ciphertext=ciphertext, nonce=nonce, keyVersion=version, updatedAt=db_now())
    )
    return int(result.rowcount)
