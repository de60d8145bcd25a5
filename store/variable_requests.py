"""Scoped-variable bootstrap requests (Runtime §7.5): what a deferred subagent waits for.

A request row says which env values a parent's `subagent_create` is missing; it never
shows values. Once a client provides them (the `weft serve` gateway), they are stored
sealed like thread env, bound to the request, and the child's `thread.init` takes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy import Connection, RowMapping, select, update

from weft.activities.crypto import Keyring
from weft.contract.subagents import VariableRequest
from weft.store.database import Database
from weft.store.sealed import seal, unseal
from weft.store.tables import variable_requests

# The largest value one variable may hold, as UTF-8 JSON text.
MAX_VALUE_BYTES = 64 * 1024

# What one scoped variable may hold (`check_values` rejects anything else).
VariableValue = str | int | float | bool


class BootstrapError(Exception):
    """A bootstrap request cannot be used as asked; the message names the request."""


class RequestNotFound(BootstrapError, LookupError):
    """No such request (or it belongs to another parent thread)."""


class AlreadyProvided(BootstrapError):
    """The request's values were provided before; they are never replaced."""


class NotProvided(BootstrapError):
    """The request is still waiting for its values."""


class InvalidValues(BootstrapError, ValueError):
    """Provided values do not answer the request; `fields` names each bad one."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.fields = [field for field, _ in problems]
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


class VariableRequests:
    """Variable requests by id, each of one parent thread; provided values sealed at rest."""

    def __init__(self, database: Database, keyring: Keyring | None) -> None:
        self._db = database
        self._keyring = keyring

    def create(self, request: VariableRequest) -> VariableRequest:
        """Record `request` as pending; recording the same request id again changes nothing.

        Returns the request as stored (the first recording wins).
        """
        now = datetime.now(UTC)
        created = _parse_time(request.created_at) or now
        data = request.model_copy(update={"status": "pending", "created_at": created.isoformat()})
        statement = self._db.insert_ignoring_duplicates(variable_requests, ["request_id"]).values(
            request_id=request.request_id,
            parent_thread_id=request.parent_thread_id,
            status="pending",
            data=data.model_dump(mode="json", by_alias=True, exclude={"status"}),
            values={},
            created_at=created,
            updated_at=now,
        )
        with self._db.write() as connection:
            connection.execute(statement)
            stored = _select(connection, request.request_id)
        assert stored is not None  # just inserted, or there already
        return _request(stored)

    def get(
        self, request_id: str, *, parent_thread_id: str | None = None
    ) -> VariableRequest | None:
        """The request, or None when unknown (or, with `parent_thread_id`, another parent's)."""
        with self._db.read() as connection:
            row = _select(connection, request_id)
        if row is None or not _belongs(row, parent_thread_id):
            return None
        return _request(row)

    def provide(
        self,
        request_id: str,
        values: Mapping[str, object],
        *,
        parent_thread_id: str | None = None,
    ) -> VariableRequest:
        """Check and store the request's values (sealed) and mark it provided.

        Raises RequestNotFound, AlreadyProvided or InvalidValues; nothing is stored then.
        """
        with self._db.write() as connection:
            row = _select(connection, request_id, for_update=True)
            if row is None or not _belongs(row, parent_thread_id):
                raise RequestNotFound(_unknown(request_id, parent_thread_id))
            request = _request(row)
            if request.status == "provided":
                raise AlreadyProvided(
                    f"variable request {request_id!r}: values were already provided"
                )
            check_values(request, values)
            sealed = seal(dict(values), self._keyring, bound_to=_bound_to(request_id))
            connection.execute(
                update(variable_requests)
                .where(variable_requests.c.request_id == request_id)
                .values(status="provided", values=sealed, updated_at=datetime.now(UTC))
            )
        return request.model_copy(update={"status": "provided"})

    def withdraw(self, request_id: str) -> None:
        """Forget provided values and make the request pending again (their delivery failed)."""
        with self._db.write() as connection:
            connection.execute(
                update(variable_requests)
                .where(variable_requests.c.request_id == request_id)
                .values(status="pending", values={}, updated_at=datetime.now(UTC))
            )

    def provided_values(self, request_id: str) -> dict[str, VariableValue]:
        """The provided values, unsealed; raises RequestNotFound or NotProvided.

        Reading does not consume them, so a retried `thread.init` reads the same values.
        """
        with self._db.read() as connection:
            row = _select(connection, request_id)
        if row is None:
            raise RequestNotFound(_unknown(request_id, None))
        if row["status"] != "provided":
            raise NotProvided(f"variable request {request_id!r} is still waiting for its values")
        return unseal(dict(row["values"]), self._keyring, bound_to=_bound_to(request_id))


def check_values(request: VariableRequest, values: Mapping[str, object]) -> None:
    """Raise InvalidValues unless `values` gives exactly the missing names, as small scalars."""
    problems: list[tuple[str, str]] = []
    wanted = ", ".join(request.missing)
    for name in values:
        if name not in request.missing:
            problems.append((f"values.{name}", f"not requested (the request asks for {wanted})"))
    for name in request.missing:
        if name not in values:
            problems.append((f"values.{name}", "missing"))
    for name, value in values.items():
        if name in request.missing:
            problem = _value_problem(value)
            if problem is not None:
                problems.append((f"values.{name}", problem))
    if problems:
        raise InvalidValues(problems)


# -- helpers ------------------------------------------------------------------------------


def _select(
    connection: Connection, request_id: str, *, for_update: bool = False
) -> RowMapping | None:
    query = select(variable_requests).where(variable_requests.c.request_id == request_id)
    if for_update:
        query = query.with_for_update()  # PostgreSQL; SQLite holds the write lock already
    return connection.execute(query).mappings().first()


def _request(row: RowMapping) -> VariableRequest:
    return VariableRequest.model_validate({**row["data"], "status": row["status"]})


def _belongs(row: RowMapping, parent_thread_id: str | None) -> bool:
    return parent_thread_id is None or row["parent_thread_id"] == parent_thread_id


def _unknown(request_id: str, parent_thread_id: str | None) -> str:
    if parent_thread_id is None:
        return f"unknown variable request {request_id!r}"
    return f"thread {parent_thread_id!r} has no variable request {request_id!r}"


def _bound_to(request_id: str) -> str:
    return f"variable request {request_id}"


def _value_problem(value: object) -> str | None:
    if value is None or isinstance(value, dict | list):
        return "must be a string, number or boolean"
    if not isinstance(value, str | int | float | bool):
        return f"must be a string, number or boolean, not {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_VALUE_BYTES:
        return f"is {size} bytes; the limit is {MAX_VALUE_BYTES}"
    return None


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


__all__ = [
    "MAX_VALUE_BYTES",
    "AlreadyProvided",
    "BootstrapError",
    "InvalidValues",
    "NotProvided",
    "RequestNotFound",
    "VariableRequests",
    "VariableValue",
    "check_values",
]
