"""Schemathesis against the live API: every operation of its OpenAPI document, with the
token, on a real dev server and worker. No reply may be a server error, and every reply
must be documented: its status, its content type and its body's schema.

Path parameters sometimes name real threads (seeded below, one of them waiting on a human)
and their real actions, queue entries and messages, so the happy paths are reached too.
Examples are derandomized and few per operation, so the run is reproducible and short.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import requests
import schemathesis
from api_support import API_TOKEN, ApiStack, api_stack
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support import add_script

from weft.definitions import Definitions, define_agent, define_model, define_prompt

EXAMPLES_PER_OPERATION = 25


@schemathesis.serializer("application/zip")
def _bundle_bytes(_ctx: Any, value: Any) -> bytes:
    """`POST /threads/import` takes a bundle's raw bytes: the generated value as bytes (not
    a bundle, so the route must refuse it with a documented 4xx, never fail)."""
    return value if isinstance(value, bytes) else json.dumps(value).encode()


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Quick answers, so a turn waited for ends at once; "ask" waits on a human.
SCRIPT = {
    "turns": [
        {
            "match": "ask",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which?"}}]},
                {"text": "ok"},
            ],
        },
        {"match": "*", "replies": [{"text": "hi"}]},
    ]
}


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="p", toolDescription="p", model="scripted", prompt="Hi.", tools=["ask_human"]
        ),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )


async def _seed(stack: ApiStack) -> dict[str, list[str]]:
    """Real ids for the path parameters: threads, an action, queue entries, messages."""
    started = []
    for first in ("hello", "ask me", "ask me too"):
        reply = await stack.http.post("/threads", json={"agent": "helper", "messages": [first]})
        started.append(reply.json()["threadId"])
    waiting = started[1]
    read: dict[str, Any] = {}
    for _ in range(400):
        read = (await stack.http.get(f"/threads/{waiting}")).json()
        if read.get("pendingActions"):
            break
        await asyncio.sleep(0.05)
    queued = await stack.http.post(f"/threads/{waiting}/messages", json={"content": "later"})
    stack.store.files.write_file(waiting, "/notes/a.txt", "hello")
    messages = [m.id for m in stack.store.messages.list(waiting)]
    return {
        # The waiting thread first and twice: its action, queue and messages are real.
        "thread_id": [waiting, waiting, *started],
        "action_id": [a["actionId"] for a in read.get("pendingActions", [])],
        "queue_id": [queued.json()["queueId"]],
        "message_id": messages,
        "path": ["notes/a.txt"],
    }


def _fuzz(url: str, known: dict[str, list[str]]) -> list[str]:
    """Run every operation's examples; returns the failures, one line each."""
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=auth)
    failures: list[str] = []
    with requests.Session() as session:
        for result in schema.get_all_operations():
            if isinstance(result, Err):  # an operation schemathesis cannot read is a failure too
                failures.append(f"unreadable operation: {result.err()}")
                continue
            failures += _fuzz_operation(result.ok(), url, auth, session, known)
    return failures


def _fuzz_operation(
    operation: Any,
    url: str,
    auth: dict[str, str],
    session: requests.Session,
    known: dict[str, list[str]],
) -> list[str]:
    """Fuzz one operation; its failures (none, or one: the first found)."""

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: report, fast
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(), data=st.data())
    def check(case: Any, data: Any) -> None:
        for name in list(case.path_parameters or {}):
            real = known.get(name, [])
            if real and data.draw(st.booleans()):
                case.path_parameters[name] = data.draw(st.sampled_from(real))
        body = case.body if isinstance(case.body, dict) else {}
        if "agent" in body and data.draw(st.booleans()):
            body["agent"] = "helper"  # a start the worker accepts, with the rest fuzzed
        if body.get("wait") == "completed":
            body["timeoutSeconds"] = 1  # a turn waiting on a human must not hold the run
        # Derandomized keys repeat across operations, and a key reused for another
        # request is refused: mostly send fresh ones, so the routes are reached.
        if case.headers and "Idempotency-Key" in case.headers and data.draw(st.booleans()):
            case.headers["Idempotency-Key"] = str(uuid.uuid4())
        response = case.call(base_url=url, session=session, headers=auth, timeout=60)
        case.validate_response(response, checks=CHECKS)

    try:
        check()
    except Exception as err:  # every operation is fuzzed; all failures are reported
        return [f"{operation.label}: {str(err).strip()[:2000]}"]
    return []


async def test_the_live_api_conforms_to_its_schema(
    start_worker, temporal_client, weft_config, scripted_server
):
    worker = await start_worker(_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        known = await _seed(stack)
        # Schemathesis calls synchronously: in a thread, while this loop serves the API.
        failures = await asyncio.to_thread(_fuzz, stack.url, known)
        assert not failures, "\n\n".join(failures)
        listing = await stack.http.get("/threads", params={"status": "running", "limit": 100})
        for thread in listing.json()["threads"]:
            await stack.http.post(
                f"/threads/{thread['threadId']}/terminate",
                headers={"Idempotency-Key": f"cleanup-{uuid.uuid4()}"},
            )
