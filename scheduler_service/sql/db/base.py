"""What every table shares: the declarative base, the column types that differ on MySQL, the
binary collation and the id type. The tables are in ``models.py`` and the satellite modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, LargeBinary, String
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeEngine

__all__ = ["ID", "MYSQL_TABLE_ARGS", "Base", "Blob", "MediumBlob", "Timestamp"]

#: DATETIME(3) on MySQL, like the legacy table; values are UTC (see scheduler_service.sql.db.clock).
#: Timestamps have no server default here: every insert sets them from the database clock.
Timestamp: TypeEngine[datetime] = DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
#: Ciphertexts are small; BLOB holds 64 KiB less one byte.
Blob: TypeEngine[bytes] = LargeBinary().with_variant(mysql.BLOB(), "mysql", "mariadb")
#: A checkpoint may be exactly 64 KiB, which BLOB cannot hold.
MediumBlob: TypeEngine[bytes] = LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")

#: A binary collation: identifiers compare byte for byte (``ALICE`` is not ``alice``), and every
#: table shares it so foreign keys between them hold (migration 0006).
MYSQL_TABLE_ARGS: dict[str, Any] = {
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
ID = String(191)


class Base(DeclarativeBase):
    pass
