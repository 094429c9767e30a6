"""Syntax checks on request fields, run before any database access (reliability S24b)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from scheduler_service.core import identity
from scheduler_service.core.errors import InvalidRequestError, echo
from scheduler_service.core.ids import is_valid_job_id
from shared.error_codes import ErrorCode

HASH_PATTERN = re.compile(r"^[0-9a-f]{64}$")
INSTANCE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}$")
#: User ids come from the calling service; ASCII without spaces, so that no two spellings of one
#: user (case, width, trailing spaces) can exist next to each other under the binary collation.
USER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+=/-]{0,190}$")
#: Visible ASCII: any key a client generates (UUIDs, hashes, "order-17/retry") but no spaces.
IDEMPOTENCY_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")
MAX_ATTEMPT_NO = 1_000
EVENT_ID_PATTERN = re.compile(r"^[0-9]{1,19}$")
MAX_EVENT_ID = 2**63 - 1


def job_id(value: str, field: str = "job_id") -> str:
    if not is_valid_job_id(value):
        raise InvalidRequestError(f"{field} is not a valid job id", field=field)
    return value


def credential_id(value: str) -> str:
    """Credential ids are made like job ids."""
    if not is_valid_job_id(value):
        raise InvalidRequestError(
            "credential_id is not a valid credential id", field="credential_id"
        )
    return value


def user_id(value: str, field: str = "x-user-id") -> str:
    """A user id exactly as given (never trimmed or folded): ids compare byte for byte."""
    if not USER_ID_PATTERN.fullmatch(value):
        raise InvalidRequestError(
            f"{field} must be 1-191 ASCII letters, digits or _.:@+=/- (no spaces), starting"
            " with a letter or digit",
            field=field,
        )
    return value


def idempotency_key(value: str) -> str:
    if value and not IDEMPOTENCY_KEY_PATTERN.fullmatch(value):
        raise InvalidRequestError(
            "idempotency_key must be 1-255 visible ASCII characters (no spaces)",
            field="idempotency_key",
        )
    return value


def attempt_no(value: int) -> int:
    if not 1 <= value <= MAX_ATTEMPT_NO:
        raise InvalidRequestError("attempt_no must be at least 1", field="attempt_no")
    return value


def instance_id(value: str) -> str:
    """A well-formed runtime instance id that the caller's token may act for.

    The caller is the current task's: call this where the request is received, never in a
    task that applies several callers' reports together (:func:`instance_id_format` there)."""
    instance_id_format(value)
    identity.check_instance(value)
    return value


def instance_id_format(value: str) -> str:
    """A well-formed runtime instance id, whoever the caller is."""
    if not INSTANCE_ID_PATTERN.fullmatch(value):
        raise InvalidRequestError(
            "runtime_instance_id must be 1-100 letters, digits or _.:@/-",
            field="runtime_instance_id",
        )
    return value


def output_hash(value: str) -> str:
    if not HASH_PATTERN.fullmatch(value):
        raise InvalidRequestError(
            "output_hash must be 64 lowercase hex digits", field="output_hash"
        )
    return value


def progress(value: int) -> int:
    if not 0 <= value <= 100:
        raise InvalidRequestError("progress must be between 0 and 100", field="progress")
    return value


def max_bytes(value: bytes | str, limit: int, field: str) -> None:
    size = len(value.encode() if isinstance(value, str) else value)
    if size > limit:
        raise InvalidRequestError(f"{field} is larger than {limit} bytes", field=field)


#: Deepest nesting of objects and arrays a JSON value may have: MariaDB's JSON_VALID (the check
#: on its JSON columns) refuses 32 levels, and a document the database cannot store must be
#: refused as bad input, not fail as an internal error.
MAX_JSON_DEPTH = 31


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


#: The largest integer a lease carries exactly: a protobuf ``Struct`` number is a double.
MAX_LEASE_INTEGER = 2**53
#: The most a snapshot, or params, takes of a lease as a protobuf ``Struct``: the two together
#: leave room under a lease's 4 MiB for the rest of it (the resume text is cut to what fits).
MAX_LEASE_INPUT_BYTES = 1792 * 1024
#: A bound on what protobuf adds around each value and key of a ``Struct`` (tags and length
#: prefixes of the value, its map entry or list slot), for messages under 2 MiB; the size
#: estimated with it is never below the encoded one.
_STRUCT_FRAMING = 8


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Last-one-wins would store a different document than the one its sender validated.
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return value


def json_document(
    text: str,
    field: str,
    code: ErrorCode = ErrorCode.INVALID_ARGUMENT,
    *,
    lease_numbers: bool = False,
) -> Any:
    """``text`` parsed as JSON (an object key at most once) and checked by :func:`json_value`."""
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as duplicate:
        raise InvalidRequestError(
            f"{field} repeats the object key {echo(duplicate.key)}", field=field, code=code
        ) from None
    except (ValueError, RecursionError):
        raise InvalidRequestError(f"{field} is not valid JSON", field=field) from None
    return json_value(value, field, code, lease_numbers=lease_numbers)


def json_value(
    value: Any,
    field: str,
    code: ErrorCode = ErrorCode.INVALID_ARGUMENT,
    *,
    lease_numbers: bool = False,
) -> Any:
    """``value`` if the database can store it and give it back as it is: numbers finite (no NaN,
    Infinity or 1e400), at most :data:`MAX_JSON_DEPTH` levels deep, text valid Unicode (no lone
    surrogates). With ``lease_numbers`` (a snapshot or params, which a lease carries as a
    ``Struct``), integers also within ±2**53, the range a double holds exactly."""
    problem = lease_problem(value) if lease_numbers else None
    if problem is not None:
        raise InvalidRequestError(f"{field} {problem}", field=field, code=code)
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidRequestError(
                f"{field} holds a number outside the finite IEEE-754 range", field=field, code=code
            )
        if isinstance(item, str):
            _unicode(item, field, code)
        elif isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise InvalidRequestError(
                    f"{field} is nested deeper than {MAX_JSON_DEPTH} levels", field=field, code=code
                )
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str):
                    _unicode(key, field, code)
                pending.append((child, depth + 1))
    return value


def _unicode(text: str, field: str, code: ErrorCode) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(
            f"{field} holds text that is not valid Unicode", field=field, code=code
        ) from None


def lease_problem(value: Any) -> str | None:
    """Why ``value`` cannot travel in a lease as a protobuf ``Struct`` (an object of JSON values,
    numbers as doubles, :data:`MAX_JSON_DEPTH` levels at most), or None if it can. Pure, so the
    claim can set such a job apart (a legacy row, a row written by hand) before any stream sees it.
    """
    if not isinstance(value, dict):
        return "must be a JSON object"
    pending: list[tuple[Any, int]] = [(value, 0)]
    size = 0
    while pending:
        item, depth = pending.pop()
        problem = _leaf_problem(item)
        size += _STRUCT_FRAMING + _payload_bytes(item)
        if problem is None and isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                return f"is nested deeper than {MAX_JSON_DEPTH} levels"
            if isinstance(item, dict) and not all(isinstance(key, str) for key in item):
                return "has an object key that is not text"
            if isinstance(item, dict):
                size += sum(_STRUCT_FRAMING + _payload_bytes(key) for key in item)
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        if problem is not None:
            return problem
    if size > MAX_LEASE_INPUT_BYTES:
        return (
            f"is larger than a lease can carry (about {size} bytes as a protobuf Struct;"
            f" at most {MAX_LEASE_INPUT_BYTES})"
        )
    return None


def _payload_bytes(item: Any) -> int:
    if isinstance(item, str):
        return len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))
    return 8 if isinstance(item, int | float) and not isinstance(item, bool) else 0


def _leaf_problem(item: Any) -> str | None:
    if isinstance(item, bool) or item is None or isinstance(item, str | dict | list):
        return None
    if isinstance(item, int):
        if abs(item) <= MAX_LEASE_INTEGER:
            return None
        return (
            "holds an integer beyond ±2**53, which a lease cannot carry exactly"
            " (send large ids as strings)"
        )
    if isinstance(item, float):
        return None if math.isfinite(item) else "holds a number outside the finite range"
    return f"holds a value of type {type(item).__name__}, which is not JSON"


def event_position(value: str, field: str) -> int:
    """An event id as SubscribeEvents takes it: a decimal position within BIGINT."""
    if not EVENT_ID_PATTERN.fullmatch(value) or int(value) > MAX_EVENT_ID:
        raise InvalidRequestError(f"{field} is not an event id", field=field)
    return int(value)


def against_schema(model: type[BaseModel], value: Any, field: str, code: ErrorCode) -> BaseModel:
    """``value`` validated by ``model``; the error names the first failing field path."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in (field, *first["loc"]))
        raise InvalidRequestError(f"{path}: {first['msg']}", field=path, code=code) from None
