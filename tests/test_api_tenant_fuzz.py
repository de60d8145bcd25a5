"""Tenant isolation, proven against the live API: every operation of the served OpenAPI
document, called with tenant A's key on a real dev server and worker, while tenant B has
threads (one waiting on a human, one closed, a task's attempt, a job item's), tasks, a job,
an action, a queued message, messages and a file, all carrying B's marker.

Two passes call the routes: a plain loop over every operation with B's ids in its path (so
each route is certainly covered), and Schemathesis drawing path parameters and id-naming
body fields from B's ids, A's own and made-up ones. After every reply the same check runs
(`Isolation`): no reply to A shows B's marker or an id of B's that A did not send, and a
request naming one of B's ids is refused exactly as its twin is: the same request naming
an unknown id of the same shape (or, for a new task's or job's id, A's own).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import requests
import schemathesis
from api_support import ApiStack, api_stack
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.core.result import Err
from support import add_script, agent_definitions

MARKER = f"zebracorn-{uuid.uuid4().hex[:10]}"  # in B's messages, question, task, job, file
SCOPES = ["threads:read", "threads:write", "actions:respond", "tasks:read", "tasks:write"]
EXAMPLES_PER_OPERATION = 6
# A refusal comes at once (a loaded machine may take a second or two); under the event
# stream's heartbeat (15 s), so an opened stream is caught waiting too.
LOOP_REPLY_SECONDS = 5
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
# Path parameters that name something of one tenant's, by the kind of id they take.
ID_PARAMS = {
    "thread_id": "thread",
    "parent_thread_id": "thread",
    "task_id": "task",
    "job_id": "job",
    "action_id": "action",
    "queue_id": "queue",
    "message_id": "message",
}
# Body fields that name a thread, task or job (to create it with that id, or refer to it).
ID_FIELDS = {"threadId": "thread", "taskId": "task", "jobId": "job", "dependsOn": "task"}


@dataclass
class TenantIds:
    """One tenant's real ids, by kind (`ID_PARAMS`' values), and a file path of its."""

    ids: dict[str, list[str]] = field(default_factory=dict)
    file: str = ""

    def add(self, kind: str, *found: str) -> None:
        self.ids.setdefault(kind, []).extend(found)

    def every(self) -> set[str]:
        return {i for kind in self.ids.values() for i in kind}


def _client(stack: ApiStack, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


async def _until(check: Any, what: str, *, seconds: float = 30) -> Any:
    """Poll the async `check` until it returns something truthy (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {seconds} s: {what}")


async def _start(http: httpx.AsyncClient, message: str) -> str:
    reply = await http.post("/threads", json={"agent": "helper", "messages": [message]})
    assert reply.status_code == 201, reply.text
    thread_id: str = reply.json()["threadId"]
    return thread_id


async def _waiting(http: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    """The read model of `thread_id` once it waits on a human."""

    async def pending() -> dict[str, Any] | None:
        read: dict[str, Any] = (await http.get(f"/threads/{thread_id}")).json()
        return read if read.get("pendingActions") else None

    found: dict[str, Any] = await _until(pending, f"{thread_id} waits on a human")
    return found


async def _seed(stack: ApiStack, http: httpx.AsyncClient, tag: str, *, job: bool) -> TenantIds:
    """A tenant's things, each made with its key: a thread waiting on a human (with a
    queued message and a file), a closed thread, a task not started, a task that ran (its
    attempt thread), and, with `job`, a job of one item (its task and thread)."""
    seeded = TenantIds(file=f"notes/{tag}.txt")
    waiting = await _start(http, f"ask {tag}")
    closed = await _start(http, f"{tag} hello")
    read = await _waiting(http, waiting)
    seeded.add("action", *[a["actionId"] for a in read["pendingActions"]])
    queued = await http.post(f"/threads/{waiting}/messages", json={"content": f"later {tag}"})
    assert queued.status_code == 202, queued.text
    seeded.add("queue", queued.json()["queueId"])
    await asyncio.to_thread(stack.store.files.write_file, waiting, "/" + seeded.file, tag)

    async def idle() -> bool:
        read = (await http.get(f"/threads/{closed}")).json()
        return bool(read.get("counters", {}).get("turns"))

    await _until(idle, f"{closed} ran its turn")
    ended = await http.post(f"/threads/{closed}/terminate", json={"reason": tag})
    assert ended.status_code == 202, ended.text
    await stack.ctx.client.get_workflow_handle(closed).result()
    seeded.add("thread", waiting, closed)

    for auto_start in (False, True):
        made = await http.post(
            "/tasks",
            json={"objective": f"{tag} task", "assignee": "helper", "autoStart": auto_start},
        )
        assert made.status_code == 201, made.text
        seeded.add("task", made.json()["taskId"])
    if job:
        made = await http.post("/jobs", json={"assignee": "helper", "items": [f"{tag} item"]})
        assert made.status_code == 201, made.text
        seeded.add("job", made.json()["jobId"])

        async def job_ended() -> bool:
            record = (await http.get(f"/jobs/{seeded.ids['job'][0]}")).json()
            return record["status"] in ("completed", "failed")

        await _until(job_ended, "the job ended", seconds=60)

    # The tasks' attempt threads (a job's item task's too) and every message stored.
    for task_id in await asyncio.to_thread(_tasks_of, stack, seeded.ids["task"], seeded):
        seeded.add("task", task_id)
    for task_id in seeded.ids["task"]:
        record = (await http.get(f"/tasks/{task_id}")).json()
        seeded.add("thread", *[a["threadId"] for a in record.get("attempts", [])])
    for thread_id in seeded.ids["thread"]:
        messages = await asyncio.to_thread(stack.store.messages.list, thread_id)
        seeded.add("message", *[m.id for m in messages])
    return seeded


async def _twins(http: httpx.AsyncClient) -> dict[str, str]:
    """A's own task and job, each the twin of B's when a new one's id is chosen
    (`Isolation`); never drawn, so never changed."""
    task = await http.post(
        "/tasks", json={"objective": "twin", "assignee": "helper", "autoStart": False}
    )
    job = await http.post("/jobs", json={"assignee": "helper", "items": ["twin"]})
    assert task.status_code == job.status_code == 201, (task.text, job.text)
    return {"task": task.json()["taskId"], "job": job.json()["jobId"]}


def _tasks_of(stack: ApiStack, known: list[str], seeded: TenantIds) -> list[str]:
    """The job's item tasks: the tasks of the job's tenant not among `known`."""
    if not seeded.ids.get("job"):
        return []
    tenant = stack.store.tasks.tenant(known[0])
    listed = stack.store.tasks.list(tenant=tenant, limit=500)
    return [r.task_id for r in listed if r.task_id not in known]


def _unknown_like(real: str) -> str:
    """A fresh id of the same shape as `real` that names nothing: its first run of hex
    digits drawn anew (fresh each time: a twin request may create what it names)."""
    found = re.search(r"[0-9a-f]{8,}", real)
    if found is None:
        return real[:-6] + uuid.uuid4().hex[:6]
    drawn = uuid.uuid4().hex * (len(found.group()) // 32 + 1)
    return real[: found.start()] + drawn[: len(found.group())] + real[found.end() :]


# A request that creates a thread, task or job under an id it chooses: (path, body field).
CREATIONS = {("/threads", "threadId"), ("/tasks", "taskId"), ("/jobs", "jobId")}


class Isolation:
    """The check every reply to A passes. What B owns (ids, marker) never shows unless A
    sent it, and a request naming B's ids is answered as its twin naming ids A may ask of.

    Why twins and not a fixed status: an answer reveals nothing about B exactly when it is
    the answer A gets without B. A reference to a thread, task or job (a path parameter, a
    dependency, a task's scope, a link) has for twin the same request naming an unknown id
    of the same shape: a path id is checked before the route runs (api/auth.py), so it
    must be 404 (403 when the route needs a scope the key lacks, refused before anything
    is looked up); a body id may be refused later (422), but only with the very words an
    unknown id gets. An id *chosen* for a new task or job (`CREATIONS`) has for twin A's
    own task or job in the same state: their ids are one namespace across tenants, so that
    an id is taken is all any caller can learn, and whose it is, or anything about it, must
    not show. An id chosen for a new thread has for twin an unknown id of the same shape,
    as a reference has: a tenant's key may choose only its own threads' ids or new ones in
    its own space (docs/tenants.md#thread-ids), so B's is refused as a free one is. Either
    way a success is never right: whatever A may do with an id that is not its own, it
    must not do with B's.
    """

    def __init__(self, url: str, key: str, theirs: TenantIds, twins: dict[str, str]) -> None:
        self.url = url
        self.auth = {"Authorization": f"Bearer {key}"}
        self.secrets = {*theirs.every(), MARKER}
        self.path_ids = {*theirs.ids["thread"], *theirs.ids["task"], *theirs.ids.get("job", [])}
        self.kinds = {i: kind for kind, ids in theirs.ids.items() for i in ids}
        self.twins = twins  # A's own id of each kind, in the state B's seeded one is in
        self.calls = 0
        self._lock = threading.Lock()

    def check(
        self,
        request: tuple[str, str, dict[str, str], bytes | None],
        reply: tuple[int, dict[str, str], bytes],
        send: Any,
    ) -> str | None:
        """Why `reply` to `request` (method, url, headers, body) fails the check, or None.
        `send` sends a request and returns (status, content)."""
        method, url, headers, body = request
        status, reply_headers, content = reply
        with self._lock:
            self.calls += 1
        sent = f"{url}\n{json.dumps(headers)}\n{(body or b'').decode('utf-8', 'replace')}"
        shown = f"{json.dumps(reply_headers)}\n{content.decode('utf-8', 'replace')}"
        named = sorted((i for i in self.kinds if i in sent), key=len, reverse=True)
        leaked = sorted(s for s in self.secrets if s in shown and s not in sent)
        where = f"{method} {url} -> {status}"
        if leaked:
            return f"{where}: shows B's {leaked}: {shown[:600]}"
        if not named:
            return None
        path = url.split("?", 1)[0]
        if any(i in path for i in self.path_ids) and status not in (403, 404):
            return f"{where}: a path naming B's id must be 404 (or 403): {content[:300]!r}"
        if not 400 <= status < 500:
            return f"{where}: a request naming B's {named} must be refused: {content[:300]!r}"
        chosen = self._chosen_id(method, urlsplit(url).path, body)
        twin_of = {
            i: self.twins[self.kinds[i]]
            if i == chosen and self.kinds[i] in self.twins
            else _unknown_like(i)
            for i in named
        }
        twin_url, twin_body = url, body
        for real, twin in twin_of.items():
            twin_url = twin_url.replace(real, twin)
            if twin_body is not None:
                twin_body = twin_body.replace(real.encode(), twin.encode())
        twin_headers = {
            name: str(uuid.uuid4()) if name.lower() == "idempotency-key" else value
            for name, value in headers.items()
        }
        twin_status, twin_content = send(method, twin_url, twin_headers, twin_body)
        expected = twin_content
        for real, twin in twin_of.items():
            expected = expected.replace(twin.encode(), real.encode())
        if (twin_status, expected) != (status, content):
            return (
                f"{where}: answered otherwise than its twin naming {list(twin_of.values())} "
                f"({twin_status}): B's {content[:300]!r} vs the twin's {twin_content[:300]!r}"
            )
        return None

    def _chosen_id(self, method: str, path: str, body: bytes | None) -> str | None:
        """B's id that a creation (`CREATIONS`) chooses for its new thread, task or job."""
        if method != "POST" or not body:
            return None
        try:
            fields = json.loads(body)
        except ValueError:
            return None
        if not isinstance(fields, dict):
            return None
        chosen = next((fields.get(f) for p, f in CREATIONS if p == path), None)
        return chosen if chosen in self.kinds else None


def _send(session: requests.Session) -> Any:
    def send(method: str, url: str, headers: dict[str, str], body: bytes | None) -> Any:
        headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        reply = session.request(method, url, headers=headers, data=body, timeout=60)
        return reply.status_code, reply.content

    return send


# -- the plain loop: every operation, B's ids in its path --------------------------------

Call = tuple[str, str, dict[str, str], bytes | None]  # method, path, headers, body

# Bodies that reach past validation, so a route looks its ids up (path templates).
BODIES: dict[str, dict[str, Any]] = {
    "/threads/{thread_id}/messages": {"content": "hello"},
    "/threads/{thread_id}/turns": {"content": "hello"},
    "/threads/{thread_id}/actions/{action_id}": {"decision": "approve"},
    "/threads/{thread_id}/budget": {"maxCostUsd": 1},
    "/threads/{parent_thread_id}/variables/{request_id}": {"values": {"X": "1"}},
    "/threads/{thread_id}/fork": {},
    "/tasks/{task_id}/update": {"objective": "x"},
    "/tasks/{task_id}/delegate": {"to": "helper"},
    "/tasks/{task_id}/link": {"dependsOn": "task-000000000000"},
    "/tasks/{task_id}/unlink": {"dependsOn": "task-000000000000"},
    "/tasks/{task_id}/complete": {"response": "x"},
    "/tasks/{task_id}/progress": {"message": "x"},
}


def _route_calls(schema: dict[str, Any], ours: TenantIds, theirs: TenantIds) -> list[Call]:
    """Every operation with B's ids in its path: each of B's threads, tasks, jobs on the
    routes naming one; and A's thread with B's action, queue entry, message or file."""
    calls: list[Call] = []
    for template, operations in schema["paths"].items():
        params = re.findall(r"{([^}]+)}", template)
        for method in operations:
            if method not in ("get", "post", "delete"):
                continue
            body = BODIES.get(template, {}) if method == "post" else None
            for values in _fillings(params, ours, theirs):
                path = template
                for name, value in values.items():
                    path = path.replace("{" + name + "}", value)
                encoded = None if body is None else json.dumps(body).encode()
                headers = {"Content-Type": "application/json"} if body is not None else {}
                if method == "post":
                    headers["Idempotency-Key"] = str(uuid.uuid4())
                calls.append((method.upper(), path, headers, encoded))
                if path.endswith("/events"):
                    calls.append(("GET", path, {"Accept": "text/event-stream"}, None))
    return calls


def _fillings(params: list[str], ours: TenantIds, theirs: TenantIds) -> list[dict[str, str]]:
    """Path parameter values: B's own everywhere (each of B's ids of the first parameter's
    kind; for a thread, B's tasks' and job's too: they are workflow ids as well), then A's
    first parameter with B's second, so lookups inside A's thread or task are reached."""
    if not params:
        return [{}]
    first, rest = params[0], params[1:]
    kind = ID_PARAMS.get(first)
    firsts = theirs.ids.get(kind, []) if kind else ["x"]
    if kind == "thread":
        firsts = [*firsts, *theirs.ids["task"], *theirs.ids.get("job", [])]

    def value(name: str, who: TenantIds) -> str:
        if name == "path":
            return who.file
        kind = ID_PARAMS.get(name)
        return who.ids[kind][0] if kind and who.ids.get(kind) else f"{name}-1"

    fillings = [{first: f, **{n: value(n, theirs) for n in rest}} for f in firsts]
    if rest and kind:
        fillings.append({first: value(first, ours), **{n: value(n, theirs) for n in rest}})
    return fillings


def _body_calls(ours: TenantIds, theirs: TenantIds) -> list[Call]:
    """Bodies naming B's ids: a thread, task or job started under B's id, a task depending
    on B's task or scoped to B's thread, a job of B's thread, A's task linked to B's."""
    base = {"objective": "x", "assignee": "helper", "autoStart": False}
    running, closed = theirs.ids["thread"][:2]
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/threads", {"agent": "helper", "threadId": running}),
        ("/threads", {"agent": "helper", "threadId": closed}),
    ]
    for thread_id in (running, closed):
        bodies.append(("/tasks", {**base, "scope": {"threadId": thread_id}}))
        bodies.append(("/jobs", {"assignee": "helper", "items": ["x"], "threadId": thread_id}))
    for task_id in theirs.ids["task"][:2]:
        bodies.append(("/tasks", {**base, "taskId": task_id}))
        bodies.append(("/tasks", {**base, "dependencies": [task_id]}))
        bodies.append((f"/tasks/{ours.ids['task'][0]}/link", {"dependsOn": task_id}))
    for job_id in theirs.ids.get("job", []):
        bodies.append(("/jobs", {"assignee": "helper", "items": ["x"], "jobId": job_id}))
    return [
        (
            "POST",
            path,
            {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())},
            json.dumps(body).encode(),
        )
        for path, body in bodies
    ]


def _loop(url: str, isolation: Isolation, calls: list[Call]) -> list[str]:
    """Send each call with the isolation's key; the failures of the check, one line each.
    Every call names something of B's, or nothing: it is answered at once, and one left
    waiting (a stream, a turn, a long poll) reached more than nothing, so it fails."""
    failures: list[str] = []
    with requests.Session() as session:
        send = _send(session)
        for method, path, headers, body in calls:
            full = {**isolation.auth, **headers}
            try:
                reply = session.request(
                    method, url + path, headers=full, data=body, timeout=LOOP_REPLY_SECONDS
                )
            except requests.RequestException as err:  # a body still coming is one too
                failures.append(
                    f"{method} {path}: no whole answer in {LOOP_REPLY_SECONDS} s: {err}"
                )
                continue
            problem = isolation.check(
                (method, url + path, full, body),
                (reply.status_code, dict(reply.headers), reply.content),
                send,
            )
            if problem:
                failures.append(problem)
    return failures


# -- Schemathesis ------------------------------------------------------------------------


@schemathesis.serializer("application/zip")
def _bundle_bytes(context: Any, value: Any) -> bytes:
    """A drawn body of `POST /threads/import` (a bundle, not described by a schema): its
    bytes as drawn, else its JSON, so the route is reached and refuses what is no bundle."""
    return value if isinstance(value, bytes) else json.dumps(value).encode()


def _fuzz(
    url: str, isolation: Isolation, pools: dict[str, list[str]], files: list[str]
) -> list[str]:
    """Every operation's examples with A's key; the failures, the first of each operation."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=isolation.auth)
    failures: list[str] = []
    with requests.Session() as session:
        send = _send(session)
        for result in schema.get_all_operations():
            if isinstance(result, Err):
                failures.append(f"unreadable operation: {result.err()}")
                continue
            operation = result.ok()
            found = _fuzz_operation(operation, url, isolation, session, send, pools, files)
            failures += [f"{operation.label}: {found[0]}"] if found else []
    return failures


def _fuzz_operation(
    operation: Any,
    url: str,
    isolation: Isolation,
    session: requests.Session,
    send: Any,
    pools: dict[str, list[str]],
    files: list[str],
) -> list[str]:
    """The check's failures on this operation's examples (collected, not raised: a
    request that changed something is not one Hypothesis may replay)."""
    found: list[str] = []

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(), data=st.data())
    def check(case: Any, data: Any) -> None:
        # Mostly real ids (B's, and A's so its own lookups are reached), sometimes what
        # was drawn; B's ids also where a body names a thread, task or job.
        for name in list(case.path_parameters or {}):
            pool = pools.get(ID_PARAMS.get(name, ""), [])
            if pool and data.draw(st.integers(0, 3)) > 0:
                case.path_parameters[name] = data.draw(st.sampled_from(pool))
            elif name == "path" and data.draw(st.booleans()):
                case.path_parameters[name] = data.draw(st.sampled_from(files))
        body = case.body if isinstance(case.body, dict) else {}
        for name, kind in ID_FIELDS.items():
            if name in body and data.draw(st.booleans()):
                body[name] = data.draw(st.sampled_from(pools[kind]))
        if "dependencies" in body and data.draw(st.booleans()):
            body["dependencies"] = [data.draw(st.sampled_from(pools["task"]))]
        for name in ("agent", "assignee"):
            if name in body and data.draw(st.booleans()):
                body[name] = "helper"  # reached by the worker, the rest fuzzed
        if body.get("wait") == "completed":
            body["timeoutSeconds"] = 1  # a turn waiting on a human must not hold the run
        if case.query and "wait" in case.query:
            case.query["wait"] = 0  # a long poll of a quiet thread would wait its full time
        if case.headers and "Idempotency-Key" in case.headers:
            case.headers["Idempotency-Key"] = str(uuid.uuid4())
        reply = case.call(base_url=url, session=session, headers=isolation.auth, timeout=30)
        sent = reply.request
        raw = sent.body.encode() if isinstance(sent.body, str) else sent.body
        problem = isolation.check(
            (sent.method or "GET", sent.url or "", dict(sent.headers), raw),
            (reply.status_code, {k: ", ".join(v) for k, v in reply.headers.items()}, reply.content),
            send,
        )
        if problem:
            found.append(problem)

    check()
    return found


@pytest.mark.timeout(240)  # about 60 s; more only when requests are left waiting
async def test_tenant_a_never_sees_or_reaches_tenant_bs_things(
    start_worker, temporal_client, weft_config, scripted_server
):
    """With tenant A's key, no operation shows B's ids or marker, and every request that
    names one of B's threads, tasks, jobs, actions, queue entries or messages is answered
    as its twin naming an unknown id (or A's own, for an id chosen for a new task or job):
    by a plain loop over every route, then by Schemathesis."""
    script = add_script(scripted_server, SCRIPT)
    worker = await start_worker(agent_definitions(script, tools=["ask_human"]))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        a_key = stack.store.api_keys.create("tenant-a", SCOPES).secret
        b_key = stack.store.api_keys.create("tenant-b", SCOPES).secret
        async with _client(stack, a_key) as a_http, _client(stack, b_key) as b_http:
            theirs = await _seed(stack, b_http, MARKER, job=True)
            # An Idempotency-Key B used, which A sends with the same body: per tenant, so
            # A's request is its own (were it B's, the reply would show B's thread).
            shared_key = {"Idempotency-Key": f"shared-{uuid.uuid4()}"}
            made = await b_http.post("/threads", json={"agent": "helper"}, headers=shared_key)
            assert made.status_code == 201, made.text
            theirs.add("thread", made.json()["threadId"])
            ours = await _seed(stack, a_http, "tenant-a-own", job=False)
            twins = await _twins(a_http)

        # Listings are checked too: wait until visibility lists B's threads at all.
        async def listed() -> bool:
            page = (await stack.http.get("/threads", params={"limit": 100})).json()
            return set(theirs.ids["thread"][:2]) <= {t["threadId"] for t in page["threads"]}

        await _until(listed, "visibility lists B's threads")
        isolation = Isolation(stack.url, a_key, theirs, twins)
        schema = (await stack.http.get("/openapi.json")).json()
        calls = _route_calls(schema, ours, theirs) + _body_calls(ours, theirs)
        json_body = {"Content-Type": "application/json", **shared_key}
        calls.append(("POST", "/threads", json_body, json.dumps({"agent": "helper"}).encode()))
        began = time.monotonic()
        failures = await asyncio.to_thread(_loop, stack.url, isolation, calls)
        # The `default` tenant's key as well, on every route: `default` is whose a
        # workflow recording no tenant is, so it is the key a lax check would let through.
        default_key = stack.store.api_keys.create("default", SCOPES).secret
        as_default = Isolation(stack.url, default_key, theirs, twins)
        routes = _route_calls(schema, ours, theirs)
        failures += await asyncio.to_thread(_loop, stack.url, as_default, routes)
        looped, loop_seconds = isolation.calls + as_default.calls, time.monotonic() - began
        pools = {
            kind: [*theirs.ids.get(kind, []), *ours.ids.get(kind, [])[:1]]
            for kind in ("thread", "task", "job", "action", "queue", "message")
        }
        files = [theirs.file, ours.file]
        failures += await asyncio.to_thread(_fuzz, stack.url, isolation, pools, files)
        print(
            f"isolation checked on {looped} looped replies ({loop_seconds:.1f} s) and "
            f"{isolation.calls + as_default.calls - looped} drawn ({time.monotonic() - began - loop_seconds:.1f} s)"
        )
        assert not failures, "\n\n".join(failures)
        # Nor did A tie anything of its own to B's threads: a task scoped to a thread, and a
        # job of a thread, are in that thread's subagent summary, which B reads (B's own
        # tasks and job belong to no thread).
        for thread_id in theirs.ids["thread"][:2]:
            summary = await stack.http.get(f"/threads/{thread_id}/subagents")
            assert summary.status_code == 200, summary.text
            tied = summary.json()["tasks"]["items"] + summary.json()["jobs"]["items"]
            assert tied == [], summary.text
        listing = await stack.http.get("/threads", params={"status": "running", "limit": 100})
        for thread in listing.json()["threads"]:
            await stack.http.post(f"/threads/{thread['threadId']}/terminate", json={})
