"""Rewind and fork over every surface on a real stack: the source closes pointing at its
successor (store, read model, events, SSE `end`), and HTTP and CLI refuse a mid-turn point."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from api_support import api_stack, sse
from fork_support import jot_definitions, source_script, turn_ends, two_turns
from support import event_schema_validator, sequence_of, weft_cli

from weft.api.idempotency import REPLAYED_HEADER
from weft.client.forks import ForkRefused, Forks
from weft.client.resume import thread_read
from weft.client.threads import Threads
from weft.contract.events import Event


def _turn_id(event: Event) -> str:
    """The turn of a turn.completed event."""
    assert event.turn_id is not None, f"{event.type} {event.event_id} names no turn"
    return event.turn_id


async def test_rewind_closes_the_source_pointing_at_its_successor(
    start_worker, temporal_client, weft_config, scripted_server
):
    """POST /rewind (idempotent) forks after turn one and closes the source; its read model,
    events and SSE `end` name the successor, and the fork names its source."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        threads = Threads(temporal_client, task_queue=worker.task_queue, store=stack.store)
        source = await two_turns(threads, stack.store)
        first = turn_ends(stack.store, source)[0]
        body = {"at": first.turn_id, "reason": "try again"}
        headers = {"Idempotency-Key": f"rewind-{source}"}

        reply = await stack.http.post(f"/threads/{source}/rewind", json=body, headers=headers)
        assert reply.status_code == 200, reply.text
        successor = reply.json()["threadId"]
        again = await stack.http.post(f"/threads/{source}/rewind", json=body, headers=headers)
        assert again.json()["threadId"] == successor
        assert again.headers[REPLAYED_HEADER] == "true"

        result = await asyncio.wait_for(temporal_client.get_workflow_handle(source).result(), 30)
        with pytest.raises(ForkRefused, match="has closed: fork it instead"):
            await Forks(temporal_client, stack.store).rewind(source, at=_turn_id(first))
        assert result["status"] == "cancelled"
        assert f"rewound: continued by thread {successor} (try again)" == result["reason"]

        read = (await stack.http.get(f"/threads/{source}")).json()
        assert read["successorThreadId"] == successor
        fork_read = (await stack.http.get(f"/threads/{successor}")).json()
        assert fork_read["forkedFrom"] == {
            "threadId": source,
            "atSequence": first.sequence,
            "atTurnId": first.turn_id,
            "rewind": True,
        }
        async with sse(stack.http, source) as stream:
            end = await stream.read_until(lambda m: m.get("event") == "end")
        assert json.loads(end["data"])["successorThreadId"] == successor
        completed = [
            json.loads(m["data"])
            for m in stream.events()
            if m.get("event") == "history.rollback.completed"
        ]
        assert completed[0]["payload"]["successorThreadId"] == successor
        assert stack.store.values.get(successor, "stage") == "one"
        # What the rewind and the fork wrote is in the Agent Runtime event schema.
        validator = event_schema_validator()
        for thread in (source, successor):
            for event in stack.store.events.read(thread, limit=10_000):
                validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))


async def test_http_fork_refuses_a_point_inside_a_turn(
    start_worker, temporal_client, weft_config, scripted_server
):
    """POST /fork and /rewind inside a turn are 409 (the fork's naming the nearest valid
    points, the rewind writing nothing); at a turn end it starts the fork (201), whose read
    model names its source."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        threads = Threads(temporal_client, task_queue=worker.task_queue, store=stack.store)
        source = await two_turns(threads, stack.store)
        first, second = turn_ends(stack.store, source)

        inside = await stack.http.post(
            f"/threads/{source}/fork", json={"at": sequence_of(second) - 1}
        )
        assert inside.status_code == 409, inside.text
        assert "the nearest valid points are" in inside.text
        assert f"after: event {second.sequence}" in inside.text
        rewind = await stack.http.post(
            f"/threads/{source}/rewind", json={"at": str(sequence_of(second) - 1)}
        )
        assert rewind.status_code == 409, rewind.text
        # A refused rewind wrote nothing on the source, and left it running.
        assert not stack.store.events.read(source, types=["history.rollback.started"])
        assert (await stack.http.get(f"/threads/{source}")).json()["status"] == "waiting_input"
        unknown = await stack.http.post("/threads/no-such-thread/fork", json={"at": 1})
        assert unknown.status_code == 404

        made = await stack.http.post(f"/threads/{source}/fork", json={"at": first.sequence})
        assert made.status_code == 201, made.text
        fork = made.json()["threadId"]
        read = (await stack.http.get(f"/threads/{fork}")).json()
        assert read["forkedFrom"]["threadId"] == source
        assert read["forkedFrom"]["rewind"] is False
        assert (await stack.http.get(f"/threads/{source}")).json()["successorThreadId"] is None


async def test_cli_fork_and_rewind(
    start_worker, temporal_client, weft_config, scripted_server, tmp_path
):
    """`weft thread fork` prints the fork, refuses a mid-turn point in one line, and
    `weft thread rewind` closes the source naming its successor, which its tail prints."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first, second = turn_ends(store, source)
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )

    code, out, err = await weft_cli(
        config, "thread", "fork", source, "--at", _turn_id(first), "--json"
    )
    assert code == 0, err
    fork = json.loads(out)
    assert fork["forkedFrom"]["atSequence"] == first.sequence
    assert store.values.get(fork["threadId"], "stage") == "one"

    code, out, err = await weft_cli(
        config, "thread", "fork", source, "--at", str(sequence_of(second) - 1)
    )
    assert code == 1 and "Traceback" not in err, err
    [line] = err.strip().splitlines()
    assert line.startswith("weft: --at: event ") and "nearest valid points" in line, line

    code, out, err = await weft_cli(config, "thread", "rewind", source, "--at", _turn_id(second))
    assert code == 0, err
    successor = out.split("continued by ")[1].split()[0]
    assert out.startswith(f"rewound {source} at event {second.sequence}")
    await asyncio.wait_for(temporal_client.get_workflow_handle(source).result(), 30)
    read = await thread_read(temporal_client, store, source)
    assert read is not None and read.successor_thread_id == successor
    code, out, err = await weft_cli(config, "thread", "tail", source, "--no-follow")
    assert code == 0, err
    assert f"[rewound: continued by thread {successor}]" in out
    assert (await Forks(temporal_client, store).forked_from(successor)).rewind  # type: ignore[union-attr]
