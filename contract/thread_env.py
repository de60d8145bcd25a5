"""Thread env values (Standard Agents Env): typed text or secret; secrets stay out of prompts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:  # definitions' models, named in a signature only
    from weft.contract.definitions import AgentDef, PromptDef

EnvType = Literal["text", "secret"]


class EnvEntry(BaseModel):
    """One env value and its type; the spec's default type is secret."""

    value: Any
    type: EnvType = "secret"


def parse_env(raw: dict[str, Any]) -> dict[str, EnvEntry]:
    """Accept `{name: value}` (secret) or `{name: {value, type}}`."""
    entries: dict[str, EnvEntry] = {}
    for name, item in raw.items():
        if isinstance(item, dict) and "value" in item and set(item) <= {"value", "type"}:
            entries[name] = EnvEntry.model_validate(item)
        else:
            entries[name] = EnvEntry(value=item)
    return entries


def secret_values(env: Mapping[str, Any]) -> list[str]:
    """The text of every env value typed secret, longest first (so a secret inside another
    is redacted whole). Takes `EnvEntry`s or raw values as a start input gives them."""
    entries = [
        item if isinstance(item, EnvEntry) else parse_env({name: item})[name]
        for name, item in env.items()
    ]
    found = {str(e.value) for e in entries if e.type == "secret" and e.value is not None}
    return sorted((value for value in found if value), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str], marker: str) -> str:
    """`text` with every secret value replaced by `marker`, longest first.

    A secret quoted inside JSON text is escaped (a quote or backslash in it), so that
    spelling is replaced too: UI summaries and span content are both JSON often.
    """
    spellings = {form for s in secrets if s for form in (s, json.dumps(s)[1:-1])}
    for secret in sorted(spellings, key=len, reverse=True):
        text = text.replace(secret, marker)
    return text


def merge_env(*layers: dict[str, Any]) -> dict[str, EnvEntry]:
    """Resolve layers lowest first (prompt, agent, instance, thread): later layers win."""
    merged: dict[str, EnvEntry] = {}
    for layer in layers:
        merged.update(parse_env(layer))
    return merged


def prompt_env(
    prompt: PromptDef, agent: AgentDef, thread_env: dict[str, Any] | None
) -> dict[str, EnvEntry]:
    """The env a prompt's system prompt and tools see: the thread's values over the
    agent's over the prompt's (Runtime §4). Every reader of a prompt's env asks here, so
    the layers' order is written once."""
    return merge_env(prompt.env, agent.env, thread_env or {})


def model_visible(env: dict[str, EnvEntry], name: str) -> str:
    """The text a prompt may show for `name`: the value if it is text, never a secret."""
    entry = env.get(name)
    if entry is None:
        return f"[env {name} is not set]"
    if entry.type == "secret":
        return f"[env {name} is secret]"
    return str(entry.value)


# Field names (and their JSON aliases) whose values are env: secrets or scoped transfer data.
_ENV_FIELDS = ("env", "scoped_env", "scopedEnv")
# Deep enough for thread.init's result (result > snapshot > prompts > prompt > tools > tool)
# and for a continued run's start input (start > carry_over > snapshot > ... > tool).
_MAX_DEPTH = 8


def carries_env(value: Any, depth: int = _MAX_DEPTH) -> bool:
    """Whether `value` holds a non-empty env field in a model, mapping or list, 6 levels deep."""
    if depth <= 0:
        return False
    if isinstance(value, BaseModel):
        fields: dict[str, Any] = {name: getattr(value, name) for name in type(value).model_fields}
    elif isinstance(value, dict):
        fields = value
    elif isinstance(value, list | tuple):
        return any(carries_env(item, depth - 1) for item in value)
    else:
        return False
    for name, item in fields.items():
        if name in _ENV_FIELDS and item:
            return True
        if isinstance(item, BaseModel | dict | list | tuple) and carries_env(item, depth - 1):
            return True
    return False
