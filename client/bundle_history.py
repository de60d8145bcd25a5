"""A thread's Temporal histories for a bundle, with no secret left in clear.

Every run along the continue-as-new chain is fetched as stored: payloads weft's codec
encrypted stay encrypted (the bundle cannot open them, and neither can anyone without the
keys); a payload marked as carrying env that was stored in clear (no codec keys) has its
data replaced; any other payload has the thread's secret values redacted from its text.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.thread_env import EnvEntry, parse_env, secret_values

REDACTED = "[redacted by weft export]"
_ENCRYPTED = base64.b64encode(b"binary/encrypted").decode()
_SECRET_MARK = "weft-secret"  # transport/codec.py's SECRET_MARK, which client/ may not import
_REDACTED_MARK = "weft-redacted"
_ENV_KEYS = ("env", "scopedEnv", "scoped_env")
_SNAPSHOT_ID = re.compile(r'"snapshot_?[iI]d"\s*:\s*"([^"\\]+)"')


async def fetch_runs(client: Client, thread_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(run id, history JSON) of every run of the thread, oldest first; [] when Temporal
    no longer knows the thread (past retention, or another namespace)."""
    try:
        run_id: str | None = (await client.get_workflow_handle(thread_id).describe()).run_id
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return []
        raise
    runs: list[tuple[str, dict[str, Any]]] = []
    while run_id:
        history = await client.get_workflow_handle(thread_id, run_id=run_id).fetch_history()
        runs.append((run_id, history.to_json_dict()))
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
    runs.reverse()
    return runs


def spellings(secrets: Iterable[str]) -> list[str]:
    """Each secret as raw text and as JSON escapes it (ASCII-escaped or not), longest first."""
    found = {
        form
        for s in secrets
        if s
        for form in (s, json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1])
    }
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, secret_spellings: list[str]) -> str:
    """`text` with every spelling of a secret replaced."""
    for spelling in secret_spellings:
        text = text.replace(spelling, REDACTED)
    return text


def redact_value(node: Any, secret_spellings: list[str]) -> Any:
    """A copy of a JSON value with every spelling of a secret replaced inside its strings.

    Inside strings, never across the JSON text: a short secret that happens to be part of a
    key or of JSON syntax must not break the record.
    """
    if isinstance(node, str):
        return redact_text(node, secret_spellings)
    if isinstance(node, list):
        return [redact_value(item, secret_spellings) for item in node]
    if isinstance(node, dict):
        return {key: redact_value(value, secret_spellings) for key, value in node.items()}
    return node


def snapshot_ids_in(history: dict[str, Any]) -> set[str]:
    """The definition snapshot ids the history's plain payloads name."""
    found: set[str] = set()
    for payload in _payloads(history):
        if payload["metadata"].get("encoding") != _ENCRYPTED and payload.get("data"):
            found.update(
                _SNAPSHOT_ID.findall(base64.b64decode(payload["data"]).decode("utf-8", "replace"))
            )
    return found


def env_secrets(node: Any) -> set[str]:
    """The secret values of every `env` / `scopedEnv` mapping in `node` (definitions declare
    env defaults, typed secret unless said otherwise)."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= env_secrets(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in _ENV_KEYS and isinstance(value, dict):
                found.update(secret_values(value))
            else:
                found |= env_secrets(value)
    return found


def scrub_history(history: dict[str, Any], secret_spellings: list[str]) -> None:
    """Redact `history` in place (see the module docstring): plain JSON payloads also keep
    only the names and types of any env mapping they hold."""
    for payload in _payloads(history):
        metadata: dict[str, str] = payload["metadata"]
        if metadata.get("encoding") == _ENCRYPTED:
            continue  # ciphertext, kept as stored
        if _SECRET_MARK in metadata:
            payload["data"] = base64.b64encode(json.dumps(REDACTED).encode()).decode()
            metadata[_REDACTED_MARK] = base64.b64encode(b"1").decode()
            continue
        raw = payload.get("data")
        if not raw:
            continue
        text = base64.b64decode(raw).decode("utf-8", errors="replace")
        cleaned = _cleaned(text, secret_spellings)
        if cleaned != text:
            payload["data"] = base64.b64encode(cleaned.encode()).decode()


def _cleaned(text: str, secret_spellings: list[str]) -> str:
    """A payload's JSON text with env values left out and secrets redacted in its strings;
    text that is not JSON is redacted as text; text with nothing to change is kept as is."""
    try:
        value = json.loads(text)
    except ValueError:
        return redact_text(text, secret_spellings)
    cleaned = redact_value(without_env_values(value), secret_spellings)
    return text if cleaned == value else json.dumps(cleaned, separators=(",", ":"))


def env_names(env: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, type) of each env entry, values left out."""
    return [(name, entry.type) for name, entry in parse_env(env).items()]


def without_env_values(node: Any) -> Any:
    """A copy of `node` where every `env` / `scopedEnv` mapping keeps names and types only."""
    if isinstance(node, list):
        return [without_env_values(item) for item in node]
    if not isinstance(node, dict):
        return node
    copied: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ENV_KEYS and isinstance(value, dict):
            copied[key] = {name: {"type": _type_of(item)} for name, item in value.items()}
        else:
            copied[key] = without_env_values(value)
    return copied


def _type_of(item: Any) -> str:
    try:
        return parse_env({"x": item})["x"].type
    except ValueError:
        return EnvEntry(value=None).type


def _payloads(node: Any) -> Iterable[dict[str, Any]]:
    """Every Temporal payload in a history's JSON: an object with `metadata.encoding`."""
    if isinstance(node, dict):
        metadata = node.get("metadata")
        if isinstance(metadata, dict) and "encoding" in metadata:
            yield node
            return
        for value in node.values():
            yield from _payloads(value)
    elif isinstance(node, list):
        for value in node:
            yield from _payloads(value)
