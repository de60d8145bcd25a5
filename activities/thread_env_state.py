"""ThreadState's env: what it resolved (`env`, `env_type`) and `set_env`, a thread-level
value, the highest layer of the thread's env.

A `set_env` value is written to the thread's row in the store at once (sealed there when keys are
configured), where every later tool call, hook and model call of the thread reads env
from; this ThreadState sees it at once too. A `set_env` intent tells the workflow, whose
view of env (`ActiveAgent.env`) decides what subagents receive; the intent's payload
carries `env`, so the codec encrypts it in Temporal history.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from weft.activities.thread_scope import ThreadScope
from weft.contract.thread_env import EnvEntry, EnvType
from weft.contract.transcript_edits import check_env_name

ENV_TYPES: tuple[str, ...] = get_args(EnvType)


class ThreadEnv:
    """The env a ThreadState resolved (`env`, `env_type`) and its changes (`set_env`)."""

    def __init__(self, scope: ThreadScope, entries: dict[str, EnvEntry]) -> None:
        """`entries` is shared with the tools this call invokes: a value one of them sets
        is seen by the caller at once."""
        self._scope = scope
        # Secrets included: tools may see them, the tool span redacts them.
        self.entries = entries

    def env(self, name: str) -> Any | None:
        """An env value, secrets included (tools may see secrets; models never do)."""
        entry = self.entries.get(name)
        return entry.value if entry else None

    def env_type(self, name: str) -> EnvType:
        """`text` or `secret`; unknown names are secret, as the spec says."""
        entry = self.entries.get(name)
        return entry.type if entry else "secret"

    async def set_env(self, name: str, value: Any, *, type: str = "text") -> None:
        """Set the thread's env value `name` (`type` is `text` or `secret`).

        Thread values win over the instance's, the agent's and the prompt's. A `text`
        value is model-visible (a prompt's env part shows it); a `secret` is seen by tools
        only. The value must be JSON (a string, number, boolean, list or object).
        """
        check_env_name(name)
        if type not in ENV_TYPES:
            raise ValueError(f"set_env type must be text or secret, not {type!r}")
        if value is None:
            raise ValueError(f"set_env({name!r}) needs a value; None is not an env value")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"set_env({name!r}): the value must be JSON: {err}") from None
        scope = self._scope
        scope.intents.require("set_env")
        entry = EnvEntry(value=value, type=type)  # checked above
        # The event names the variable and its type, never its value.
        event = scope.event(
            "thread.updated",
            f"setenv{scope.number('set_env')}",
            {"envSet": {"name": name, "type": type}},
        )
        await scope.write(scope.store.threads.set_env, scope.thread_id, name, entry, event)
        self.entries[name] = entry
        scope.intents.add("set_env", {"env": {name: entry.model_dump(mode="json")}})
