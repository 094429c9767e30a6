"""The output chunks' table: the text each attempt's model call wrote, in pieces, with
their offsets; pruned once the job has ended (its output is in the result)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import ID, MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiJobOutputChunk", "ChunkText"]

#: A chunk is small, but the first of a resumed attempt repeats all the text before it.
ChunkText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


class AiJobOutputChunk(Base):
    """One piece of an attempt's text. No foreign key: an insert must not wait on the job row
    (the group commit holds it already), and the sweep removes a finished job's chunks."""

    __tablename__ = "AiJobOutputChunk"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    jobId: Mapped[str] = mapped_column(ID, primary_key=True)
    attemptNo: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Where the text starts and ends in the attempt's text, in Unicode code points.
    startOffset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    endOffset: Mapped[int] = mapped_column(BigInteger)
    text: Mapped[str] = mapped_column(ChunkText)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)
