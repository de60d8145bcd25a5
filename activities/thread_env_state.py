"""ThreadState's `set_env`: a thread-level env value, the highest layer of the thread's env.

The value is written to the thread's row in the store at once (sealed there when keys are
configured), where every later tool call, hook and model call of the thread reads env
from; this ThreadState sees it at once too. A `set_env` intent tells the workflow, whose
view of env (`ActiveAgent.env`) decides what subagents receive; the intent's payload
carries `env`, so the codec encrypts it in Temporal history.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_args

from weft.activities.thread_intents import require_intents
from weft.activities.thread_writes import ThreadWrites
from weft.contract.thread_env import EnvEntry, EnvType
from weft.contract.transcript_edits import check_env_name

if TYPE_CHECKING:
    from weft.contract.events import Event
    from weft.store import Store

ENV_TYPES: tuple[str, ...] = get_args(EnvType)


class ThreadEnvState(ThreadWrites):
    """Env changes of ThreadState (Standard Agents `setEnv`); `env`/`env_type` read them."""

    _store: Store
    _env: dict[str, EnvEntry]
    _intents_from: str | None
    _counts: Counter[str]
    thread_id: str

    def _intent(self, kind: str, data: dict[str, Any]) -> None: ...

    _event: Callable[[str, str, dict[str, Any]], Event]

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
        require_intents("set_env", self._intents_from)
        entry = EnvEntry(value=value, type=type)  # checked above
        self._counts["set_env"] += 1
        # The event names the variable and its type, never its value.
        event = self._event(
            "thread.updated",
            f"setenv{self._counts['set_env']}",
            {"envSet": {"name": name, "type": type}},
        )
        await self._write(self._store.threads.set_env, self.thread_id, name, entry, event)
        self._env[name] = entry
        self._intent("set_env", {"env": {name: entry.model_dump(mode="json")}})
