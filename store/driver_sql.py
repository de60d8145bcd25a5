"""Statements every step runs, in the driver's own SQL instead of SQLAlchemy Core.

A Core statement costs more in the worker's Python than in the database: building it,
its cache key and its expanded parameters. For the events write's idempotency check (a
union with an IN list), Core took 1.0 ms of CPU a call where the same SQL handed to the
driver took 0.07 ms (3,000 calls on SQLite, one run, measured while a load benchmark
shared the machine). At a few such statements a step, across hundreds of threads, that
was a tenth of a loaded worker's CPU.

Only statements whose columns need no type processing (text, integers) go this way, so
the driver's values are the values Core would return. They run on the caller's
connection, in its transaction, like any other statement.

`cursor_rows` goes one step further, for the reads every model step makes: the DBAPI
cursor itself, with no SQLAlchemy execution context, event dispatch or result object.
Inside a step those layers cost far more than in a tight loop (the step's other work has
pushed them out of the CPU's caches): the transcript's revision, count and tail took
1.8 ms of CPU a step in the benchmark's worker against 0.4 ms in a loop. The engine's
cursor events do not see these statements.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError


def placeholders(count: int) -> str:
    """`?, ?, ?` for an IN list of `count` values (count > 0)."""
    return ", ".join("?" * count)


def driver_rows(connection: Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run `sql`, written with `?` placeholders, on `connection`; its rows as tuples."""
    statement = sql if connection.dialect.paramstyle == "qmark" else _format_style(sql)
    return [tuple(row) for row in connection.exec_driver_sql(statement, tuple(params))]


@lru_cache(maxsize=256)
def _format_style(sql: str) -> str:
    # psycopg's placeholders are %s; the statements here hold no literal % or ?.
    return sql.replace("?", "%s")


def cursor_rows(connection: Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """`driver_rows` on the connection's DBAPI cursor, in its transaction; the rows the
    driver returns (SQLite: JSON columns as text; psycopg: decoded)."""
    statement = sql if connection.dialect.paramstyle == "qmark" else _format_style(sql)
    with _cursor(connection, statement, params) as cursor:
        cursor.execute(statement, tuple(params))
        return [tuple(row) for row in cursor.fetchall()]


def cursor_executemany(connection: Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` (`?` placeholders) once per row of `rows` on the connection's DBAPI cursor,
    in its transaction: an insert every write makes, without Core's execution context and
    its per-row parameter processing (the caller hands the values as the driver stores
    them: JSON as its text)."""
    statement = sql if connection.dialect.paramstyle == "qmark" else _format_style(sql)
    with _cursor(connection, statement, rows) as cursor:
        cursor.executemany(statement, rows)


@contextmanager
def _cursor(connection: Connection, statement: str, params: Sequence[Any]) -> Iterator[Any]:
    """The connection's DBAPI cursor, closed after; a driver error raised as Core raises it
    (`IntegrityError`, `OperationalError`, …), so `Database.retrying` still retries a lost
    race (a unique violation, a lock, a deadlock)."""
    dbapi = connection.dialect.loaded_dbapi
    cursor = connection.connection.cursor()
    try:
        yield cursor
    except dbapi.Error as error:
        raise DBAPIError.instance(
            statement, params, error, dbapi.Error, dialect=connection.dialect
        ) from error
    finally:
        cursor.close()
