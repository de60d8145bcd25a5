"""Two builds of one worker deployment, the normal state during a deploy: threads pinned to
v1 move to v2 at their safe points and take its definitions as their agent's policy says, v1
stops once drained, and a rollback moves them back."""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from api_support import api_stack
from deploy_support import DEFINITIONS, BuildWorker, deploy_config, poll, promote_when_known
from deploy_worker_v2 import V2_TIMER_SUMMARY, v2_build
from support import idle_after, read, run_histories, start_thread, wait_until, weft_cli
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from weft.cli.main import run as run_weft
from weft.client.actions import respond, response
from weft.client.deploys import DeployError, Deploys
from weft.client.threads import Threads
from weft.contract.definitions_version import snapshot_digest
from weft.contract.messages import QueuedMessage
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.definitions import load_directory
from weft.store import Store
from weft.transport.codec import data_converter
from weft.workers.config import DeploymentConfig
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow

# 12 in CI: each way of waiting on v1 for each agent, twice; WEFT_DEPLOY_THREADS=100 runs
# the full size.
THREADS = int(os.environ.get("WEFT_DEPLOY_THREADS", "12"))
KINDS = ("human", "effect", "chat")
FIRST_MESSAGE = {"human": "note please", "effect": "plan a wake", "chat": "chat one"}
# v2's definitions differ from v1's in the prompt both agents use; `pinned_deployer` keeps
# its definitions until upgraded, `deployer` takes its worker's at its next session.
DEFINITIONS_V2 = Path(__file__).parent / "deploy_definitions_v2"
AGENTS = ("deployer", "pinned_deployer")
PINNED = "pinned_deployer"


def prompt_text(definitions: Path) -> str:
    """The text of the folder's `deploy_prompt`, the system prompt its threads send."""
    spec = yaml.safe_load((definitions / "prompts" / "deploy_prompt.yaml").read_text())
    return str(spec["prompt"])


V1_PROMPT, V2_PROMPT = prompt_text(DEFINITIONS), prompt_text(DEFINITIONS_V2)


class Conversation(NamedTuple):
    """A thread of the deploy: how it waits on v1, its agent, its handle."""

    kind: str
    agent: str
    handle: WorkflowHandle[Any, Any]


@pytest.mark.timeout(600)
async def test_a_rolling_deploy_moves_every_thread_and_rolls_back(
    tmp_path, dev_server, temporal_client, postgres_databases, scripted_server
):
    """v1 threads (some waiting on a person, some with an effect pending) move to a promoted
    v2 that changes the workflow's commands and the definitions, v1 stops once drained,
    every conversation goes on, each run ran on its own build's code, `latest` threads take
    v2's prompt at their next session while `pinned` ones keep v1's until upgraded, and a
    rollback moves them all back to v1."""
    url = postgres_databases()
    config = deploy_config(tmp_path, dev_server.address, url)
    v2_config = share_the_model_server(config, scripted_server)
    settings = yaml.safe_load(config.read_text())
    queue, deployment = settings["temporal"]["taskQueue"], settings["deployment"]["name"]
    deploys = Deploys(temporal_client, deployment)
    v1, v2 = BuildWorker(config, "v1"), BuildWorker(v2_config, "v2", v2=True)
    store = Store.open(url)
    try:
        await v1.start()
        await promote_when_known(deploys, "v1")
        before_v1 = last_request(scripted_server)
        threads = await start_conversations(temporal_client, queue, store)
        assert set(prompts_since(scripted_server, before_v1)) == {V1_PROMPT}

        await v2.start()
        # A ramp first, stopped by promoting the current version again.
        await poll(lambda: _ramped(deploys, "v2", 10), "v2 ramps once its worker polled", 30)
        assert await deploys.promote("v1")
        assert [v.ramping_percent for v in (await deploys.status()).versions] == [None, None]
        await promote_when_known(deploys, "v2")
        code, out, err = await weft_cli(config, "deploy", "status")
        assert code == 0, err
        assert "current v2" in out and f"{THREADS} open thread(s)" in out, out
        report = await deploys.drain_report("v1")
        assert not report.may_stop
        waiting = {t.thread_id for t in report.threads if t.awaiting_action}
        assert waiting == {c.handle.id for c in threads if c.kind == "human"}

        # Idle threads move when woken; a thread waiting on a person moves once answered
        # and its turn is over (its run ends the turn on v1, the build that started it).
        await deploys.wake("v1")
        for c in threads:
            if c.kind == "human":
                await answer_the_action(temporal_client, c.handle)
        drained = await poll(lambda: _may_stop(deploys, "v1"), "the drain report lets v1 stop", 120)
        assert drained.threads == []
        code, out, err = await weft_cli(config, "deploy", "drain-report", "v1")
        assert (code, out.split(":")[1].strip()) == (0, "may stop"), (out, err)
        await v1.stop()

        for c in threads:
            if c.kind == "effect":  # its alarm, set on v1, rings on v2
                await wait_until(
                    c.handle, lambda s: idle_after(2)(s) and not s.scheduled_effects, timeout=90
                )
        for c in threads:
            await chat(temporal_client, c.handle, f"chat on v2 {c.handle.id}")
            await assert_moved(temporal_client, store, c.handle, "v1", "v2")
        assert (await deploys.count_threads("v2")) == len(threads)
        for c in threads:
            # `latest`: v2's prompt, the move recorded; `pinned`: v1's, nothing recorded.
            pinned = c.agent == PINNED
            said = prompts_of(scripted_server, f"chat on v2 {c.handle.id}")
            assert said == [V1_PROMPT if pinned else V2_PROMPT], c
            moved = [] if pinned else [("latest", *digests(c.agent))]
            assert definitions_moves(store, c.handle.id) == moved, c

        # `weft thread upgrade` (or Threads.upgrade) moves a pinned thread to v2's prompt.
        pinned_threads = [c for c in threads if c.agent == PINNED]
        code, out, err = await weft_cli(config, "thread", "upgrade", pinned_threads[0].handle.id)
        assert code == 0 and "upgraded" in out and "prompts deploy_prompt (changed)" in out, err
        for c in pinned_threads[1:]:
            assert (await Threads(temporal_client).upgrade(c.handle.id)).status == "upgraded"
        for c in pinned_threads:
            await chat(temporal_client, c.handle, f"chat upgraded {c.handle.id}")
            assert prompts_of(scripted_server, f"chat upgraded {c.handle.id}") == [V2_PROMPT]
            assert definitions_moves(store, c.handle.id) == [("upgrade", *digests(c.agent))]

        # Rollback: v1 again, current; the threads move back at their next safe point.
        # `latest` threads take v1's definitions again; upgraded `pinned` ones keep v2's.
        v1 = BuildWorker(config, "v1")
        await v1.start()
        await promote_when_known(deploys, "v1")
        await poll(lambda: _may_stop(deploys, "v2"), "the drain report lets v2 stop", 120)
        for c in threads:
            await chat(temporal_client, c.handle, f"chat back on v1 {c.handle.id}")
            await assert_moved(temporal_client, store, c.handle, "v2", "v1")
            said = prompts_of(scripted_server, f"chat back on v1 {c.handle.id}")
            assert said == [V2_PROMPT if c.agent == PINNED else V1_PROMPT], c
            v1_digest, v2_digest = digests(c.agent)
            moved_back = ("upgrade", v1_digest, v2_digest)
            if c.agent != PINNED:
                moved_back = ("latest", v2_digest, v1_digest)
            assert definitions_moves(store, c.handle.id)[-1] == moved_back, c
        await assert_runs_replay_on_their_builds(temporal_client, threads[0].handle)
        if record := os.environ.get("WEFT_RECORD_DEPLOY_HISTORIES"):
            await record_histories(temporal_client, threads[0].handle, Path(record))
    finally:
        store.close()
        await v1.stop()
        await v2.stop()


def share_the_model_server(config: Path, scripted: ScriptedModelServer) -> Path:
    """Point v1's config at the test's scripted model server (so the test reads each
    request's system prompt) and write v2's beside it: the same, on the v2 definitions."""
    scripts = yaml.safe_load((DEFINITIONS / "scripts" / "deploy.yaml").read_text())
    scripted.set_script("deploy", scripts["deploy"])
    settings = yaml.safe_load(config.read_text())
    settings["providers"] = {"scripted": {"kind": "openai", "baseUrl": scripted.openai_base_url}}
    config.write_text(yaml.safe_dump(settings))
    v2_config = config.with_name("weft-v2.yml")
    v2_config.write_text(yaml.safe_dump({**settings, "definitions": str(DEFINITIONS_V2)}))
    return v2_config


@functools.cache
def digests(agent: str) -> tuple[str, str]:
    """The agent's definitions digest in v1's folder and in v2's."""
    v1, v2 = (
        snapshot_digest(load_directory(folder).snapshot(agent))
        for folder in (DEFINITIONS, DEFINITIONS_V2)
    )
    return v1, v2


def _system_prompt(request: dict[str, Any]) -> str:
    system = [m for m in request["messages"] if m["role"] == "system"]
    return str(system[0]["content"]) if system else ""


def _last_user_text(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return str(users[-1]["content"]) if users else ""


def last_request(scripted: ScriptedModelServer) -> int:
    """The sequence number of the last request the server received (0: none yet)."""
    requests = scripted.requests
    return int(requests[-1]["seq"]) if requests else 0


def prompts_since(scripted: ScriptedModelServer, seq: int) -> list[str]:
    """The system prompt of each request to the deploy script after request `seq`."""
    return [
        _system_prompt(r) for r in scripted.requests if r["seq"] > seq and r["model"] == "deploy"
    ]


def prompts_of(scripted: ScriptedModelServer, text: str) -> list[str]:
    """The system prompt of each request whose last user message is `text`."""
    return [
        _system_prompt(r)
        for r in scripted.requests
        if r["model"] == "deploy" and _last_user_text(r) == text
    ]


def definitions_moves(store: Store, thread_id: str) -> list[tuple[str, str, str]]:
    """The thread's recorded definitions moves as (reason, previous digest, new digest);
    each names the one prompt that differs between the folders."""
    moves = []
    for event in store.events.read(thread_id, types=["policy.changed"]):
        payload = event.payload
        if payload.get("policy") == "definitions":
            changed = [{"kind": "prompts", "name": "deploy_prompt", "change": "changed"}]
            assert payload["changes"] == changed, payload
            moves.append(
                (payload["reason"], payload["previousDigest"], payload["definitionsDigest"])
            )
    return moves


async def start_conversations(client: Client, queue: str, store: Store) -> list[Conversation]:
    """THREADS threads mid-conversation on v1: waiting on a person, with an effect pending,
    or idle after a chat; each kind for both agents."""
    threads = []
    for index in range(THREADS):
        kind, agent = KINDS[index % len(KINDS)], AGENTS[index // len(KINDS) % len(AGENTS)]
        message = [{"role": "user", "content": FIRST_MESSAGE[kind]}]
        handle = await start_thread(client, queue, agent, messages=message)
        threads.append(Conversation(kind, agent, handle))
    for c in threads:
        if c.kind == "human":
            await wait_until(c.handle, lambda s: bool(s.pending_actions), timeout=60)
        else:
            await wait_until(c.handle, idle_after(1), timeout=60)
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


async def _ramped(deploys: Deploys, build_id: str, percent: float) -> bool:
    """Ramp `build_id`; False while Temporal does not know it yet (its worker's first poll)."""
    try:
        return await deploys.promote(build_id, ramp=percent)
    except DeployError:
        return False


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
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
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
    with pytest.raises(DeployError, match="ramp must be a percent above 0 and at most 100"):
        await deploys.promote("v9", ramp=0)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["deploy", "promote", "v2", "--ramp", "0"], "argument --ramp: 0 is not a percent"),
        (["deploy", "promote", "v2", "--ramp", "101"], "argument --ramp: 101 is not a percent"),
        (["deploy", "promote", "v2", "--ramp", "ten"], "argument --ramp: 'ten' is not a number"),
        (["deploy", "promote", " "], "argument BUILD_ID: a build id must be non-empty"),
        (["deploy", "--deployment", "a.b", "status"], "argument --deployment: 'a.b' must be"),
        (["worker", "--deployment", "a.b"], "argument --deployment: 'a.b' must be"),
        (["worker", "--build-id", ""], "argument --build-id: a build id must be non-empty"),
    ],
)
def test_a_bad_deploy_flag_is_a_usage_error_naming_it(tmp_path, capsys, argv, named):
    """A bad `--ramp`, build id or deployment name stops the command before it connects:
    one line naming the flag, exit code 2."""
    config = tmp_path / "weft.yml"
    config.write_text(f"definitions: {DEFINITIONS}\n")
    with pytest.raises(SystemExit) as exited:
        run_weft(["--config", str(config), *argv])
    assert exited.value.code == 2
    assert named in capsys.readouterr().err


async def test_a_dev_worker_can_make_itself_current(
    start_worker, weft_config, temporal_client, scripted_server
):
    """With `setCurrentOnStart`, a lone versioned worker runs threads with no promotion, and
    `GET /deployments/{name}` lists its version as current with the thread on it."""
    scripts = yaml.safe_load((DEFINITIONS / "scripts" / "deploy.yaml").read_text())
    scripted_server.set_script("deploy", scripts["deploy"])
    name = f"weft-{uuid.uuid4().hex[:8]}"
    weft_config.deployment = DeploymentConfig(name=name, set_current_on_start=True)
    worker = await start_worker(load_directory(DEFINITIONS))
    assert worker.deployment_version is not None
    build_id = worker.deployment_version.build_id
    deploys = Deploys(temporal_client, name)
    assert (await deploys.status()).current_build_id == build_id
    # Promoting it again changes nothing; an unknown build is named with the known ones.
    assert await deploys.promote(build_id) is False
    with pytest.raises(
        DeployError, match=f"no worker of build 'v9' has polled yet .versions: {build_id}"
    ):
        await deploys.promote("v9")
    with pytest.raises(DeployError, match="it is already current"):
        await deploys.promote(build_id, ramp=10)
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

    async with api_stack(temporal_client, weft_config, worker.task_queue) as api:
        # `GET /deployments/{name}` says what `weft deploy status` says.
        async def with_the_thread() -> Any:
            body = (await api.http.get(f"/deployments/{name}")).json()
            return body if [v["threads"] for v in body["versions"]] == [1] else None

        body = await poll(with_the_thread, "GET /deployments counts the thread", 30)
        assert (body["name"], body["currentBuildId"]) == (name, build_id)
        (version,) = body["versions"]
        assert (version["buildId"], version["current"], version["rampingPercent"]) == (
            build_id,
            True,
            None,
        )
        unknown = await api.http.get("/deployments/weft-never-polled")
        assert unknown.status_code == 404, unknown.text
        assert "no worker deployment 'weft-never-polled'" in unknown.json()["error"]
        dotted = await api.http.get("/deployments/weft.v1")
        assert dotted.status_code == 422, dotted.text
