"""The `effect.run` activity on a real SQLite store, without a workflow: a second run of a
finished effect returns its recorded outcome and does not run it again; a failing attempt
commits none of its writes."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import text
from support import agent_definitions
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from weft.activities.crypto import new_key, parse_keys
from weft.activities.effect_run import EffectActivities
from weft.activities.snapshots import SnapshotCache
from weft.contract.effects import EffectRunInput, ScheduledEffect
from weft.contract.events import Event
from weft.definitions import define_effect
from weft.store import Store, ThreadRow

RUNS: list[str] = []


class CountArgs(BaseModel):
    fail: bool = False


class SecretArgs(BaseModel):
    value: str


async def keep_secret(state: Any, args: SecretArgs) -> None:
    # Made here, not passed in: effect arguments are not secret.
    await state.set_env("API_TOKEN", f"hunter2-{args.value}", type="secret")


async def count(state: Any, args: CountArgs) -> int:
    runs = (await state.get_value("runs") or 0) + 1
    await state.set_value("runs", runs)
    await state.set_value("scratch", None)  # a staged deletion
    await state.emit("counted", runs)
    state.queue_message(f"run {runs}")
    RUNS.append(state.thread_id)
    if args.fail:
        raise RuntimeError("no luck")
    return runs


@pytest.fixture
def effects(tmp_path):
    definitions = agent_definitions("unused").add(
        define_effect(name="count", args=CountArgs, execute=count),
        define_effect(name="keep_secret", args=SecretArgs, execute=keep_secret),
    )
    keyring = parse_keys([f"k1:{new_key()}"], source="test")
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}", keyring=keyring)
    snapshot = definitions.snapshot("helper")
    cache = SnapshotCache(store)
    cache.remember(snapshot)
    yield EffectActivities(store, definitions, cache), store, snapshot.snapshot_id
    store.close()


def job(snapshot_id: str, thread_id: str, name: str = "count", **args: Any) -> EffectRunInput:
    effect = ScheduledEffect(
        id=f"eff_{thread_id}",
        name=name,
        args=args,
        scheduled_at="2026-11-24T00:00:00Z",
        created_at="2026-11-24T00:00:00Z",
    )
    created = Event(
        type="job.created",
        event_id=f"{thread_id}:created",
        timestamp="2026-11-24T00:00:00Z",
        thread_id=thread_id,
        payload={"kind": "effect", "effect": effect.model_dump(mode="json", by_alias=True)},
    )
    return EffectRunInput(
        thread_id=thread_id,
        snapshot_id=snapshot_id,
        effect=effect,
        fired_at="2026-11-24T00:00:01Z",
        outbox=[created],
    )


async def test_a_finished_effect_is_not_run_again(effects):
    activities, store, snapshot_id = effects
    store.values.set("t1", "scratch", "to delete")
    first = await ActivityEnvironment().run(activities.run_effect, job(snapshot_id, "t1"))
    again = await ActivityEnvironment().run(activities.run_effect, job(snapshot_id, "t1"))
    assert RUNS.count("t1") == 1
    assert first.status == "completed" and not first.replayed
    assert again.replayed and again.intents == first.intents
    assert [i.data["content"] for i in first.intents] == ["run 1"]
    assert store.values.get("t1", "runs") == 1
    assert store.values.get("t1", "scratch") is None
    assert [e.payload["data"] for e in store.events.read("t1", types=["run.status"])] == [1]
    assert store.effects.get("t1", "eff_t1").status == "completed"
    assert len(store.events.read("t1", types=["job.completed"])) == 1


async def test_a_failing_attempt_commits_nothing(effects):
    activities, store, snapshot_id = effects
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, attempt=1)
    with pytest.raises(ApplicationError, match="raised RuntimeError: no luck"):
        await environment.run(activities.run_effect, job(snapshot_id, "t2", fail=True))
    assert store.values.get("t2", "runs") is None
    assert store.events.read("t2", types=["run.status", "job.completed", "job.failed"]) == []
    environment.info = dataclasses.replace(environment.info, attempt=3)
    last = await environment.run(activities.run_effect, job(snapshot_id, "t2", fail=True))
    assert last.status == "failed" and last.error_code == "effect_exception"
    assert last.intents == [] and store.values.get("t2", "runs") is None
    [failed] = store.events.read("t2", types=["job.failed"])
    assert "no luck" in failed.payload["error"]
    assert store.effects.get("t2", "eff_t2").status == "failed"


async def test_a_recorded_outcome_keeps_secrets_sealed(effects, tmp_path):
    """An effect's outcome holds its intents, a set_env secret among them: at rest it is
    sealed with the store's keys, and a retry still gets the value back."""
    activities, store, snapshot_id = effects
    store.threads.upsert(
        ThreadRow(thread_id="t3", agent="helper", status="running", created_at=datetime.now(UTC))
    )
    first = await ActivityEnvironment().run(
        activities.run_effect, job(snapshot_id, "t3", "keep_secret", value="secret")
    )
    assert first.status == "completed", first.error
    with store.engine.connect() as connection:
        raw = json.dumps([list(row) for row in connection.execute(text("select * from effects"))])
    assert "hunter2-secret" not in raw
    again = await ActivityEnvironment().run(
        activities.run_effect, job(snapshot_id, "t3", "keep_secret", value="secret")
    )
    assert again.replayed and again.intents == first.intents
    assert "hunter2-secret" in json.dumps([i.data for i in again.intents])
