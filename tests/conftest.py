"""Shared fixtures: a real Temporal dev server, a scripted model server, and weft workers.

Every test gets its own task queue, store file and thread ids, so tests share the servers
but nothing else.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import make_url
from support import StartWorker, ephemeral_dev_server, scratch_config
from temporalio.client import Client

from weft.definitions import Definitions
from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import WeftConfig
from weft.workers.dev_server import DevServer
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import ensure_search_attributes

ROOT = Path(__file__).resolve().parents[1]


ADMIN_URL = os.environ.get("WEFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _admin_connection() -> psycopg.Connection:
    """An autocommit connection for CREATE and DROP DATABASE, or a skip (a failure in CI)."""
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        message = f"PostgreSQL is unreachable at {ADMIN_URL}: {error}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true, so PostgreSQL tests must run)", pytrace=False)
        pytest.skip(message)


def _drop_database(admin: psycopg.Connection, name: str) -> None:
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    )
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


class _DatabaseLifetimes:
    """Which databases a test made for itself (directly or through its function fixtures),
    to drop once it is over: one made while a session or module fixture was being set up
    outlives the test that happened to make it. A plugin of its own, not hooks of this
    conftest, which pytest does not ask about session fixtures."""

    def __init__(self) -> None:
        self.setting_up: list[str] = []  # the scopes of the fixtures being set up now
        self.of_this_test: list[str] = []
        self.on_test_end: list[Callable[[list[str]], None]] = []

    def lasting(self) -> bool:
        return any(scope != "function" for scope in self.setting_up)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Iterator[Any]:
        self.setting_up.append(fixturedef.scope)
        try:
            return (yield)
        finally:
            self.setting_up.pop()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self) -> Iterator[None]:
        yield  # the test's fixtures are torn down: nothing uses its databases any more
        finished, self.of_this_test = self.of_this_test, []
        for callback in self.on_test_end:
            callback(finished)


_LIFETIMES = _DatabaseLifetimes()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_LIFETIMES, "weft-database-lifetimes")


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[Callable[[], str]]:
    """A factory of fresh, empty PostgreSQL databases (as URLs). A test's own database is
    dropped after that test, in the background while the next test runs (a DROP DATABASE
    waits for a checkpoint, about 0.2 s each: at the session's end they once added 20 s to
    it); one a session or module fixture created is dropped at the end."""
    admin = _admin_connection()
    dropper = _admin_connection()  # the background thread's own: a connection serializes
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-database")
    drops: list[Future[None]] = []
    lasting: list[str] = []

    def create() -> str:
        name = f"weft_test_{uuid.uuid4().hex[:12]}"
        admin.execute(f'CREATE DATABASE "{name}"')
        (lasting if _LIFETIMES.lasting() else _LIFETIMES.of_this_test).append(name)
        return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def drop_later(names: list[str]) -> None:
        drops.extend(background.submit(_drop_database, dropper, name) for name in names)

    _LIFETIMES.on_test_end.append(drop_later)
    try:
        yield create
    finally:
        _LIFETIMES.on_test_end.remove(drop_later)
        background.shutdown(wait=True)
        for name in [*lasting, *_LIFETIMES.of_this_test]:
            _drop_database(admin, name)
        _LIFETIMES.of_this_test.clear()
        admin.close()
        dropper.close()
        for drop in drops:
            drop.result()  # a database that could not be dropped fails the run, as before


@pytest.fixture(scope="session")
async def dev_server() -> AsyncIterator[DevServer]:
    """The bundled `temporal server start-dev`, on free ports, tuned as in temporal-dev.yml."""
    server = ephemeral_dev_server()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="session")
async def temporal_client(dev_server: DevServer) -> Client:
    """A client of the dev server with weft's data converter."""
    client = await connect(dev_server.address)
    await ensure_search_attributes(client, "default")
    return client


@pytest.fixture(scope="session")
async def scripted_server() -> AsyncIterator[ScriptedModelServer]:
    """One scripted model server for the session; tests add scripts under unique names."""
    async with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def weft_config(tmp_path: Path, dev_server: DevServer) -> WeftConfig:
    """A config for this test: its own SQLite store and the scripted provider."""
    config = scratch_config(tmp_path)
    config.temporal.address = dev_server.address
    config.temporal.task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    return config


@pytest.fixture
async def start_worker(
    temporal_client: Client, weft_config: WeftConfig, scripted_server: ScriptedModelServer
) -> AsyncIterator[StartWorker]:
    """Start AgentWorkers for this test; they are shut down when it ends."""
    started: list[AgentWorker] = []

    async def start(definitions: Definitions, **options: Any) -> AgentWorker:
        # One task queue per worker: the SDK refuses two workers of one queue in a process.
        options.setdefault("task_queue", f"tq-{uuid.uuid4().hex[:12]}")
        worker = AgentWorker(
            temporal_client,
            weft_config,
            definitions=definitions,
            scripted=scripted_server,
            **options,
        )
        await worker.__aenter__()
        started.append(worker)
        return worker

    yield start
    for worker in reversed(started):
        # A worker that cannot shut down fails the test that left it rather than hanging
        # the whole run (pytest-timeout does not cover this teardown).
        await asyncio.wait_for(worker.__aexit__(None, None, None), timeout=90)
