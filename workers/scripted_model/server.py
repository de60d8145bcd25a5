"""The scripted model server: plays scripts over the OpenAI and Anthropic wire protocols.

The only state besides the scripts is the fault counter behind `times`, keyed by
(script, conversation key, reply index), and a bounded record of requests for tests; each
record carries `request_tokens`, the request's size by the runtime's own estimator, and
`received_at`, when it arrived.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Self

from weft.workers.scripted_model import render
from weft.workers.scripted_model.context_limit import overflow_body, request_tokens
from weft.workers.scripted_model.conversation import View, anthropic_view, openai_view
from weft.workers.scripted_model.http11 import HttpServer, Request, Response
from weft.workers.scripted_model.protocol_rules import request_problem
from weft.workers.scripted_model.script import CompiledScript, Reply, ScriptError, compile_script

MAX_RECORDS = 10_000
_OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")
_ANTHROPIC_PATHS = ("/v1/messages", "/messages")


@dataclass
class _Outcome:
    status: int
    error: str | None = None
    script: str | None = None
    turn: int | None = None
    reply_index: int | None = None
    tokens: int = 0  # estimated prompt tokens (contract.context_tokens)


class ScriptedModelServer:
    """A real loopback HTTP server that answers chat requests from scripts.

    Use `async with ScriptedModelServer(scripts) as server:` or `start()` / `stop()`.
    """

    def __init__(
        self,
        scripts: dict[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_records: int = MAX_RECORDS,
    ) -> None:
        """`max_records`: the requests kept for `requests` (0: none; a benchmark sharing the
        process with what it measures keeps none: each holds its whole transcript)."""
        # Threads share the server (start_in_thread); guard the two mutable structures.
        self._lock = threading.Lock()
        self._faults: dict[tuple[str, str, int], int] = {}
        self._records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._seq = 0
        self._scripts: dict[str, CompiledScript] = {}
        for name, script in (scripts or {}).items():
            self.set_script(name, script)
        self._http = HttpServer(self._handle, host=host, port=port)
        self._host = host

    async def start(self) -> None:
        """Bind the port and start serving."""
        await self._http.start()

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        await self._http.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        return self._http.port

    @property
    def connections_accepted(self) -> int:
        """TCP connections accepted so far (keep-alive reuse keeps this low)."""
        return self._http.accepted

    @property
    def base_url(self) -> str:
        """Root URL without a path, e.g. http://127.0.0.1:PORT."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """OpenAI-style base URL (with /v1); the adapter appends /chat/completions."""
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Anthropic-style base URL (without /v1); the adapter appends /v1/messages."""
        return self.base_url

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Recorded requests, oldest first (at most `max_records`)."""
        with self._lock:
            return list(self._records)

    def clear_requests(self) -> None:
        """Forget recorded requests."""
        with self._lock:
            self._records.clear()

    def set_script(self, name: str, script: Any) -> None:
        """Add or replace a script (validated now); its fault counters start afresh."""
        compiled = compile_script(name, script)
        with self._lock:
            self._scripts = {**self._scripts, name: compiled}  # copy-on-write for readers
            self._faults = {k: v for k, v in self._faults.items() if k[0] != name}

    # --- dispatch ------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        if request.method == "POST" and request.path in _OPENAI_PATHS:
            return self._chat(request, "openai")
        if request.method == "POST" and request.path in _ANTHROPIC_PATHS:
            return self._chat(request, "anthropic")
        if request.path.startswith("/_scripts/") and request.method == "PUT":
            return self._put_script(request)
        if request.path == "/_requests" and request.method == "GET":
            return _json(200, self.requests)
        if request.path == "/_requests" and request.method == "DELETE":
            self.clear_requests()
            return _json(200, {"cleared": True})
        if request.path in ("/v1/models", "/models") and request.method == "GET":
            models = [{"id": n, "object": "model", "owned_by": "scripted"} for n in self._scripts]
            return _json(200, {"object": "list", "data": models})
        return _json(404, {"error": {"message": f"no route {request.method} {request.path}"}})

    def _put_script(self, request: Request) -> Response:
        name = request.path.removeprefix("/_scripts/")
        try:
            self.set_script(name, json.loads(request.body or b"null"))
        except (ScriptError, ValueError) as exc:
            return _json(400, {"error": {"message": str(exc)}})
        return _json(200, {"script": name})

    def _chat(self, request: Request, protocol: str) -> Response:
        received_at = time.time()
        try:
            body = json.loads(request.body)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            return self._fail(protocol, _Outcome(400, f"invalid JSON body: {exc}"))
        reader = openai_view if protocol == "openai" else anthropic_view
        view = reader(body, len(request.body))
        outcome = _Outcome(200, tokens=request_tokens(protocol, body))
        problem = request_problem(protocol, body)
        if problem is not None:
            outcome.status, outcome.error = 400, problem
            response = self._fail(protocol, outcome)
        else:
            response = self._reply(body, view, outcome)
        self._record(request.path, body, view, outcome, received_at)
        return response

    def _reply(self, body: dict[str, Any], view: View, outcome: _Outcome) -> Response:
        script = self._scripts.get(view.model)
        if script is None:
            return self._error(view, outcome, 404, f"no script named {view.model!r}")
        outcome.script = script.name
        limit = script.context_limit
        if limit is not None and outcome.tokens > limit:
            # Checked before any turn is selected, as a provider refuses before generating.
            payload = overflow_body(view.protocol, limit, outcome.tokens)
            outcome.status, outcome.error = 400, payload["error"]["message"]
            return Response(400, json.dumps(payload).encode())
        selected = script.select(view.last_user_text)
        if selected is None:
            message = f"no turn of script {script.name!r} matches {view.last_user_text[:200]!r}"
            return self._error(view, outcome, 400, message)
        outcome.turn, replies = selected
        index = outcome.reply_index = view.reply_index
        if index >= len(replies):
            message = (
                f"script {script.name!r} turn {outcome.turn} has no reply #{index} "
                f"(it has {len(replies)})"
            )
            return self._error(view, outcome, 400, message)
        reply = replies[index]
        if reply.expect is not None:
            failures = view.failed_expectations(reply.expect)
            if failures:
                message = "expectation failed: " + "; ".join(failures)
                return self._error(view, outcome, 400, message, code="expectation_failed")
        faulty = reply.has_fault and self._take_fault(script.name, view, index, reply)
        if faulty and reply.error is not None:
            return self._scripted_error(view, outcome, reply)
        planned = render.plan(script.name, view, reply, index, faulty=faulty)
        stream = body.get("stream") is True
        if not stream:
            payload = (
                render.openai_body(planned)
                if view.protocol == "openai"
                else render.anthropic_body(planned)
            )
            return Response(200, json.dumps(payload).encode(), delay_ms=reply.delay_ms)
        if view.protocol == "openai":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = render.openai_events(planned, include_usage=include_usage)
        else:
            events = render.anthropic_events(planned)
        drop_after = None
        if faulty:
            events, drop_after = _inject(events, reply)
        return Response(
            200,
            content_type="text/event-stream",
            headers={"cache-control": "no-cache"},
            events=events,
            delay_ms=reply.delay_ms,
            chunk_delay_ms=reply.chunk_delay_ms,
            drop_after=drop_after,
        )

    def _take_fault(self, script: str, view: View, index: int, reply: Reply) -> bool:
        """Count a request against the reply's `times`; True while it should still fail."""
        if reply.times is None:
            return True
        key = (script, view.conversation_key, index)
        with self._lock:
            seen = self._faults.get(key, 0)
            self._faults[key] = seen + 1
        return seen < reply.times

    def _scripted_error(self, view: View, outcome: _Outcome, reply: Reply) -> Response:
        assert reply.error is not None
        spec = reply.error
        outcome.status, outcome.error = spec.status, f"scripted error {spec.status}"
        if isinstance(spec.body, str):
            raw = spec.body.encode()
        else:
            default = (
                render.openai_error(spec.status, "scripted error")
                if view.protocol == "openai"
                else render.anthropic_error(spec.status, "scripted error")
            )
            raw = json.dumps(spec.body if spec.body is not None else default).encode()
        return Response(spec.status, raw, headers=dict(spec.headers), delay_ms=reply.delay_ms)

    def _error(
        self, view: View, outcome: _Outcome, status: int, message: str, code: str | None = None
    ) -> Response:
        outcome.status, outcome.error = status, message
        return self._fail(view.protocol, outcome, code)

    def _fail(self, protocol: str, outcome: _Outcome, code: str | None = None) -> Response:
        message = outcome.error or "error"
        payload = (
            render.openai_error(outcome.status, message, code)
            if protocol == "openai"
            else render.anthropic_error(outcome.status, message)
        )
        return Response(outcome.status, json.dumps(payload).encode())

    def _record(
        self, path: str, body: dict[str, Any], view: View, outcome: _Outcome, received_at: float
    ) -> None:
        skip = ("model", "messages", "tools", "system")
        with self._lock:
            self._seq += 1
            self._records.append(
                {
                    "seq": self._seq,
                    "protocol": view.protocol,
                    "path": path,
                    "model": view.model,
                    "system": body.get("system"),
                    "messages": body.get("messages"),
                    "tools": body.get("tools") or [],
                    "params": {k: v for k, v in body.items() if k not in skip},
                    "status": outcome.status,
                    "error": outcome.error,
                    "script": outcome.script,
                    "turn": outcome.turn,
                    "reply_index": outcome.reply_index,
                    "conversation_key": view.conversation_key,
                    "request_tokens": outcome.tokens,
                    # When it arrived (epoch seconds): what a provider's rate limit counts.
                    "received_at": received_at,
                }
            )


def _inject(events: list[bytes], reply: Reply) -> tuple[list[bytes], int | None]:
    """Apply stream faults: a garbled event, a missing terminator, a dropped connection."""
    events = list(events)
    if reply.truncate:
        events = events[:-1]  # the last event is [DONE] / message_stop
    if reply.invalid_json_after_chunks is not None:
        at = min(reply.invalid_json_after_chunks, len(events))
        events.insert(at, b'data: {"choices": [{"delta": {"content": "oops\n\n')
    return events, reply.drop_after_chunks


def _json(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload).encode())
