"""`weft task create|get|list|cancel|retry` against a live worker, and one-line errors."""

from __future__ import annotations

import json

import yaml
from support import add_script, agent_definitions, until, weft_cli

ANSWER_SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}


async def test_task_commands(start_worker, scripted_server, weft_config, tmp_path):
    """create --wait prints the completed task, get and list show it, a failed task is
    retried to completion, cancel stops a running one; bad input is one `weft:` line."""
    script = {
        "turns": [
            {"match": "slow", "replies": [{"text": "late", "delay_ms": 60_000}]},
            {"match": "*", "replies": [{"text": '{"n": 1}', "faulty_text": "no", "times": 1}]},
        ]
    }
    worker = await start_worker(agent_definitions(add_script(scripted_server, script)))
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(ANSWER_SCHEMA))

    code, out, err = await weft_cli(
        config, "task", "create", "helper", "Count.", "--schema", str(schema), "--wait"
    )
    assert code == 0, err
    failed = json.loads(out)
    assert failed["status"] == "failed" and "not JSON" in failed["attempts"][0]["error"]
    task_id = failed["taskId"]
    code, out, err = await weft_cli(config, "task", "retry", task_id, "--reason", "again")
    assert code == 0 and f"retrying {task_id}" in out, err
    store = worker.store
    await until(lambda: store.tasks.get(task_id).status == "completed", "the retry completes")
    code, out, err = await weft_cli(config, "task", "get", task_id)
    assert code == 0 and json.loads(out)["output"]["structured"] == {"n": 1}, err

    code, out, err = await weft_cli(config, "task", "create", "helper", "slow work")
    assert code == 0, err
    slow_id = out.strip()
    await until(lambda: store.tasks.get(slow_id).attempts, "the slow task's attempt started")
    code, out, err = await weft_cli(config, "task", "cancel", slow_id, "--reason", "stop")
    assert code == 0, err
    await until(lambda: store.tasks.get(slow_id).status == "cancelled", "the task is cancelled")

    code, out, err = await weft_cli(config, "task", "list")
    assert code == 0 and f"{task_id}\tcompleted" in out and f"{slow_id}\tcancelled" in out
    code, out, err = await weft_cli(config, "task", "list", "--json")
    snapshot = json.loads(out)
    assert {t["taskId"] for t in snapshot["recentTerminal"]} == {task_id, slow_id}

    code, _, err = await weft_cli(config, "task", "get", "task-000000000000")
    assert code == 1 and err.strip() == "weft: no task 'task-000000000000'"
    code, _, err = await weft_cli(config, "task", "retry", task_id)
    assert code == 1 and "only a failed, timed out or cancelled task" in err
    code, _, err = await weft_cli(
        config, "task", "create", "helper", "x", "--depends-on", "task-0000000000zz"
    )
    assert code == 1 and err.startswith("weft: invalid task: ") and "dependencies" in err


async def test_task_command_verbs(start_worker, scripted_server, weft_config, tmp_path):
    """A held task is updated, paused and completed from the command line, each printing
    the task; a refusal is one `weft:` line naming why."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "ok"}]}))
    )
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    code, out, err = await weft_cli(config, "task", "create", "helper", "Hold.", "--no-start")
    assert code == 0, err
    task_id = out.strip()
    code, out, err = await weft_cli(
        config, "task", "update", task_id, "--max-attempts", "3", "--by", "ops"
    )
    assert code == 0 and json.loads(out)["constraints"]["maxAttempts"] == 3, err
    code, _, err = await weft_cli(config, "task", "link", task_id, task_id)
    assert code == 1 and err.startswith("weft: dependency cycle: "), err
    code, out, err = await weft_cli(config, "task", "pause", task_id, "--reason", "wait")
    assert code == 0 and json.loads(out)["status"] == "paused", err
    code, _, err = await weft_cli(config, "task", "complete", task_id, "--structured", "{")
    assert code == 1 and "--structured: not JSON" in err, err
    code, out, err = await weft_cli(
        config, "task", "complete", task_id, "--response", "done", "--by", "ops"
    )
    done = json.loads(out)
    assert code == 0 and done["status"] == "completed" and done["endedBy"] == "ops", err
