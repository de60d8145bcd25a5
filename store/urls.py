"""Turn a store URL into a configured SQLAlchemy engine (SQLite or PostgreSQL)."""

from __future__ import annotations

import functools
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.pool import StaticPool

# How long a SQLite writer waits for another writer's lock before giving up, in ms.
SQLITE_BUSY_TIMEOUT_MS = 30_000

# `?synchronous=` on a SQLite store URL. In WAL mode NORMAL syncs the log at checkpoints,
# not at every commit: a killed worker or server loses nothing committed, only an OS crash
# or power loss can drop the last commits (never corrupting the file). FULL syncs every
# commit. See docs/performance.md.
SQLITE_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")

# Execution option that asks for `BEGIN IMMEDIATE` on SQLite: a transaction that reads
# and then writes (max(sequence)+1) must hold the write lock from its first statement,
# or a concurrent writer makes the upgrade fail at once with "database is locked".
WRITE_OPTION = "weft_write"


def normalize_url(url: str) -> URL:
    """Map bare `postgresql://` and `postgres://` URLs to the psycopg 3 driver."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_store_engine(url: str) -> Engine:
    """Build an engine for `url`, with the per-backend settings the store relies on."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    return _postgres_engine(parsed)


def _postgres_engine(url: URL) -> Engine:
    """An engine whose pooled connections are pinged before use only after an idle spell.

    SQLAlchemy's `pool_pre_ping` pings on every checkout: a round trip and about 8 % of a
    loaded worker's CPU (several checkouts a step). A connection used moments ago is
    alive, so only one idle for `IDLE_PING_SECONDS` is pinged (a server restart or a
    network idle timeout happens to idle connections); a dead one is replaced before the
    caller sees it. One that dies while in use fails its statement, and SQLAlchemy then
    replaces every connection it pooled before: the activity's retry runs on new ones.
    """
    engine = create_engine(url)
    event.listen(engine, "checkin", _note_checkin)
    event.listen(engine, "checkout", functools.partial(_ping_if_idle, engine))
    return engine


# A pooled PostgreSQL connection idle at least this long is pinged before it is used.
IDLE_PING_SECONDS = 10.0
_CHECKED_IN = "weft_checked_in"


def _note_checkin(_dbapi_connection: object, record: Any) -> None:
    record.info[_CHECKED_IN] = time.monotonic()


def _ping_if_idle(engine: Engine, dbapi_connection: Any, record: Any, _proxy: object) -> None:
    checked_in = record.info.get(_CHECKED_IN)
    if checked_in is None or time.monotonic() - checked_in < IDLE_PING_SECONDS:
        return  # new, or used moments ago
    try:
        engine.dialect.do_ping(dbapi_connection)
    except Exception as err:
        # The pool drops this connection and checks out another (up to three tries).
        raise DisconnectionError(f"pooled connection idle and dead: {err}") from err


def _sqlite_engine(url: URL) -> Engine:
    synchronous = url.query.get("synchronous", "normal")
    if not isinstance(synchronous, str) or synchronous.upper() not in SQLITE_SYNCHRONOUS:
        raise ValueError(
            f"store URL: synchronous={synchronous!r} is not one of "
            f"{', '.join(s.lower() for s in SQLITE_SYNCHRONOUS)}"
        )
    url = url.difference_update_query(["synchronous"])
    kwargs: dict[str, Any] = {
        "connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
    }
    database = url.database or ""
    if database in ("", ":memory:"):
        # One shared connection, or every pooled connection would see its own empty db.
        kwargs["poolclass"] = StaticPool
    else:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, **kwargs)
    event.listen(engine, "connect", functools.partial(_sqlite_on_connect, synchronous.upper()))
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(
    synchronous: str, dbapi_connection: sqlite3.Connection, _record: object
) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself, instead of pysqlite's implicit
    # (and deferred) transactions, so writers can ask for BEGIN IMMEDIATE.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        _enable_wal(cursor)
        cursor.execute(f"PRAGMA synchronous={synchronous}")
    finally:
        cursor.close()


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (a persistent setting), waiting out concurrent openers.

    The switch needs an exclusive lock and SQLite does not always call the busy handler
    for it, so several workers opening a new file at once would see "database is locked".
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_on_begin(connection: Any) -> None:
    immediate = connection.get_execution_options().get(WRITE_OPTION, False)
    # On the driver's connection: every transaction of every step begins here, and Core's
    # execution path (context, cursor events, result) cost several times SQLite's BEGIN.
    # The engine's cursor events do not see it; the "begin" event does. A driver error is
    # raised as Core would (a lock taken by another process is a race `retrying` retries).
    statement = "BEGIN IMMEDIATE" if immediate else "BEGIN"
    try:
        connection.connection.driver_connection.execute(statement)
    except sqlite3.Error as error:
        raise DBAPIError.instance(statement, (), error, sqlite3.Error) from error
