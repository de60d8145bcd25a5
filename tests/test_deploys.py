"""Two builds of one worker deployment, the normal state during a deploy: threads pinned to
v1 move to v2 at their safe points, v1 stops once drained, and a rollback moves them back."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import DEFINITIONS, BuildWorker, deploy_config, poll, promote_when_known
from deploy_worker_v2 import V2_TIMER_SUMMARY, v2_build
from support import idle_after, read, run_histories, start_thread, wait_until, weft_cli
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from weft.client.actions import respond, response
from weft.client.deploys import DeployError, Deploys
from weft.contract.messages import QueuedMessage
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.definitions import load_directory
from weft.store import Store
from weft.transport.codec import data_converter
from weft.workers.config import DeploymentConfig
from weft.workers.sandbox_runner import workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow

# 20 in CI (about a minute); WEFT_DEPLOY_THREADS=100 runs the full size.
THREADS = int(os.environ.get("WEFT_DEPLOY_THREADS", "20"))
KINDS = ("human", "effect", "chat")
FIRST_MESSAGE = {"human": "note please", "effect": "plan a wake", "chat": "chat one"}


@pytest.mark.timeout(600)
async def test_a_rolling_deploy_moves_every_thread_and_rolls_back(
    tmp_path, dev_server, temporal_client, postgres_databases
):
    """v1 threads (some waiting on a person, some with an effect pending) move to a promoted
    v2 that changes the workflow's commands, v1 stops once drained, every conversation goes
    on, each run ran on its own build's code, and a rollback moves them all back to v1."""
    url = postgres_databases()
    config = deploy_config(tmp_path, dev_server.address, url)
    settings = yaml.safe_load(config.read_text())
    queue, deployment = settings["temporal"]["taskQueue"], settings["deployment"]["name"]
    deploys = Deploys(temporal_client, deployment)
    v1, v2 = BuildWorker(config, "v1"), BuildWorker(config, "v2", v2=True)
    store = Store.open(url)
    try:
        await v1.start()
        await promote_when_known(deploys, "v1")
        threads = await start_conversations(temporal_client, queue, store)

        await v2.start()
        await promote_when_known(deploys, "v2")
        code, out, err = await weft_cli(config, "deploy", "status")
        assert code == 0, err
        assert "current v2" in out and f"{THREADS} open thread(s)" in out, out
        report = await deploys.drain_report("v1")
        assert not report.may_stop
        waiting = {t.thread_id for t in report.threads if t.awaiting_action}
        assert waiting == {h.id for kind, h in threads if kind == "human"}

        # Idle threads move when woken; a thread waiting on a person moves once answered
        # and its turn is over (its run ends the turn on v1, the build that started it).
        await deploys.wake("v1")
        for kind, handle in threads:
            if kind == "human":
                await answer_the_action(temporal_client, handle)
        drained = await poll(lambda: _may_stop(deploys, "v1"), "the drain report lets v1 stop", 120)
        assert drained.threads == []
        code, out, err = await weft_cli(config, "deploy", "drain-report", "v1")
        assert (code, out.split(":")[1].strip()) == (0, "may stop"), (out, err)
        await v1.stop()

        for kind, handle in threads:
            if kind == "effect":  # its alarm, set on v1, rings on v2
                await wait_until(
                    handle, lambda s: idle_after(2)(s) and not s.scheduled_effects, timeout=90
                )
        for _kind, handle in threads:
            await chat(temporal_client, handle, "chat on v2")
            await assert_moved(temporal_client, store, handle, "v1", "v2")
        assert (await deploys.count_threads("v2")) == len(threads)

        # Rollback: v1 again, current; the threads move back at their next safe point.
        v1 = BuildWorker(config, "v1")
        await v1.start()
        await promote_when_known(deploys, "v1")
        await poll(lambda: _may_stop(deploys, "v2"), "the drain report lets v2 stop", 120)
        for _kind, handle in threads:
            await chat(temporal_client, handle, "chat back on v1")
            await assert_moved(temporal_client, store, handle, "v2", "v1")
        await assert_runs_replay_on_their_builds(temporal_client, threads[0][1])
        if record := os.environ.get("WEFT_RECORD_DEPLOY_HISTORIES"):
            await record_histories(temporal_client, threads[0][1], Path(record))
    finally:
        store.close()
        await v1.stop()
        await v2.stop()


async def start_conversations(
    client: Client, queue: str, store: Store
) -> list[tuple[str, WorkflowHandle[Any, Any]]]:
    """THREADS threads mid-conversation on v1: waiting on a person, with an effect pending,
    or idle after a chat."""
    threads = []
    for index in range(THREADS):
        kind = KINDS[index % len(KINDS)]
        message = [{"role": "user", "content": FIRST_MESSAGE[kind]}]
        threads.append((kind, await start_thread(client, queue, "deployer", messages=message)))
    for kind, handle in threads:
        if kind == "human":
            await wait_until(handle, lambda s: bool(s.pending_actions), timeout=60)
        else:
            await wait_until(handle, idle_after(1), timeout=60)
    return threads


async def answer_the_action(client: Client, handle: WorkflowHandle[Any, Any]) -> None:
    state = await read(handle)
    await respond(client, handle.id, response(state.pending_actions[0]["actionId"], "approve"))


async def chat(client: Client, handle: WorkflowHandle[Any, Any], text: str) -> None:
    """Send a message to the thread's latest run and wait for the turn it starts to end."""
    turns = (await read(handle)).counters.turns
    message = QueuedMessage.model_validate({"role": "user", "content": text})
    await client.get_workflow_handle(handle.id).signal(SIGNAL_QUEUE_MESSAGE, message)
    state = await wait_until(handle, idle_after(turns + 1), timeout=60)
    assert state.last_outcome == "chatting", state


async def _may_stop(deploys: Deploys, build_id: str) -> Any:
    """The drain report once it lets `build_id` stop; until then its idle threads are woken
    again (one that a message had just woken may have gone idle before the promotion)."""
    await deploys.wake(build_id)
    report = await deploys.drain_report(build_id)
    return report if report.may_stop else None


async def assert_moved(
    client: Client, store: Store, handle: WorkflowHandle[Any, Any], old: str, new: str
) -> None:
    """The thread's current run is on `new`, it recorded its move from `old`, and no run of
    it failed a workflow task but for Temporal refusing a completion that came with new
    events (a signal arriving as a run continues as new): no non-determinism."""
    described = await client.get_workflow_handle(handle.id).describe()
    versioning = described.raw_description.workflow_execution_info.versioning_info
    assert versioning.deployment_version.build_id == new, versioning
    moves = [
        e.payload["continuedAsNew"]
        for e in store.events.read(handle.id, types=["thread.updated"])
        if e.payload.get("continuedAsNew", {}).get("reason") == "deployment_version_changed"
    ]
    assert {"previousBuildId": old, "buildId": new}.items() <= moves[-1].items(), moves
    for history in await run_histories(client, handle.id, handle.first_execution_run_id):
        causes = {
            WorkflowTaskFailedCause.Name(e.workflow_task_failed_event_attributes.cause)
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        }
        assert causes <= {"WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND"}, history.run_id


def v2_timers(history: Any) -> int:
    """How many times the run started the v2 build's timer."""
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and V2_TIMER_SUMMARY.encode() in e.user_metadata.summary.data
    )


async def assert_runs_replay_on_their_builds(
    client: Client, handle: WorkflowHandle[Any, Any]
) -> None:
    """Each run replays on its own build's code; a v2 run does not on v1's (so pinning, not
    luck, kept v1 runs off the v2 worker)."""
    histories = await run_histories(client, handle.id, handle.first_execution_run_id)
    v2_runs = [h for h in histories if v2_timers(h)]
    v1_runs = [h for h in histories if not v2_timers(h)]
    assert v2_runs and len(v1_runs) >= 2
    converter = data_converter(None)
    replayer = Replayer(
        workflows=[AgentThreadWorkflow],
        data_converter=converter,
        workflow_runner=workflow_runner(converter),
    )
    for history in v1_runs:
        assert (
            await replayer.replay_workflow(history, raise_on_replay_failure=False)
        ).replay_failure is None
    for history in v2_runs:
        broken = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert broken.replay_failure is not None, "v1 code replayed a v2 run"
    with v2_build():
        for history in v2_runs:
            await replayer.replay_workflow(history)


async def record_histories(client: Client, handle: WorkflowHandle[Any, Any], folder: Path) -> None:
    """Write the thread's runs as `deploy_<build>_run<N>.json` for tests/histories/deploys."""
    folder.mkdir(parents=True, exist_ok=True)
    histories = await run_histories(client, handle.id, handle.first_execution_run_id)
    for run, history in enumerate(histories, start=1):
        build = "v2" if v2_timers(history) else "v1"
        (folder / f"deploy_{build}_run{run}.json").write_text(history.to_json())


async def test_unknown_deployments_and_versions_are_named(temporal_client):
    """Status of a deployment no worker joined, a promotion of a build no worker runs, and a
    ramp out of range are each refused with what is wrong."""
    deploys = Deploys(temporal_client, "weft-never-polled")
    with pytest.raises(DeployError, match="no worker deployment 'weft-never-polled'"):
        await deploys.status()
    with pytest.raises(DeployError, match="cannot promote weft-never-polled.v9"):
        await deploys.promote("v9")
    with pytest.raises(DeployError, match="--ramp must be a percent"):
        await deploys.promote("v9", ramp=0)


async def test_a_dev_worker_can_make_itself_current(
    start_worker, weft_config, temporal_client, scripted_server
):
    """With `setCurrentOnStart`, a lone versioned worker runs threads with no promotion."""
    scripts = yaml.safe_load((DEFINITIONS / "scripts" / "deploy.yaml").read_text())
    scripted_server.set_script("deploy", scripts["deploy"])
    name = f"weft-{uuid.uuid4().hex[:8]}"
    weft_config.deployment = DeploymentConfig(name=name, set_current_on_start=True)
    worker = await start_worker(load_directory(DEFINITIONS))
    assert worker.deployment_version is not None
    build_id = worker.deployment_version.build_id
    assert (await Deploys(temporal_client, name).status()).current_build_id == build_id
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        "deployer",
        messages=[{"role": "user", "content": "chat"}],
    )
    await wait_until(handle, idle_after(1), timeout=30)
    described = await handle.describe()
    versioning = described.raw_description.workflow_execution_info.versioning_info
    assert versioning.deployment_version.build_id == build_id
