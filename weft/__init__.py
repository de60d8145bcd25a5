"""weft: durable AI agent threads on Temporal, embedded in a Python program.

```python
client = await weft.connect()                       # weft's data converter and codec
async with weft.Worker(client, definitions):        # runs the threads' workflows
    thread = await weft.Thread.start(client, "helper")
    print((await thread.ask("Weather in Oslo?")).response)
```

Defaults a user must know (docs/python-api.md has them all):

- model calls stream, writing `model.delta` events; a model defined with
  `capabilities={"supportsStreaming": False}` is called without streaming;
- `options.maxTotalSteps` caps a session at 64 steps, where a model call with the tool
  calls it asked for is one step (`Thread.start(..., options={"maxTotalSteps": N})`);
- encryption switches on when keys are found: `keys=`, else `$WEFT_CODEC_KEYS`, else the
  file `.weft/codec.keys` under the root (the current directory unless `root=` is given);
- `define_model(provider=...)` names a key of the worker's `providers` (e.g. `"openai"`),
  not a provider kind;
- the worker registers weft's search attributes on a dev server, and otherwise refuses to
  start (`SearchAttributesMissing`) listing the `temporal operator` commands.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# The top-level folders of a checkout, which weft/ holds as symlinks (and a wheel as
# folders). A checkout made without symlinks (git's `core.symlinks=false`, the default on
# Windows) has text files here instead, and would fail later on a puzzling
# `No module named 'weft.definitions'`: say so here, once, with the fix.
_PARTS = (
    "activities",
    "api",
    "cli",
    "client",
    "contract",
    "definitions",
    "store",
    "transport",
    "workers",
    "workflows",
)


def _missing_parts(folder: str) -> list[str]:
    """The parts that are not folders under `folder` (none when weft is not on disk, e.g.
    inside a zip file, where there is nothing to check)."""
    if not os.path.isdir(folder):
        return []
    return [part for part in _PARTS if not os.path.isdir(os.path.join(folder, part))]


_broken = _missing_parts(__path__[0])
if _broken:
    _more = f" and {len(_broken) - 1} more" if len(_broken) > 1 else ""
    raise ImportError(
        f"weft: weft/{_broken[0]}{_more} should be symlinks to the top-level folders, and are "
        "not (a checkout without symlinks?): run `git config core.symlinks true` and check "
        "the files out again (on Windows, with Developer Mode on)"
    )

# The public names, each imported on first use: the thread workflow lives in
# `weft.workflows`, and Temporal's sandbox imports this package before it on every workflow
# run, so this module must stay free of I/O libraries (httpx, SQLAlchemy, the client).
_EXPORTS: dict[str, str] = {
    "Keyring": "weft.activities.crypto",
    "DefinitionError": "weft.definitions",
    "Definitions": "weft.definitions",
    "FunctionEffect": "weft.definitions",
    "FunctionHook": "weft.definitions",
    "FunctionTool": "weft.definitions",
    "HookBlocked": "weft.definitions",
    "define_agent": "weft.definitions",
    "define_effect": "weft.definitions",
    "define_hook": "weft.definitions",
    "define_model": "weft.definitions",
    "define_prompt": "weft.definitions",
    "define_tool": "weft.definitions",
    "Store": "weft.store",
    "ThreadFailed": "weft.client.ask",
    "TurnWaitTimeout": "weft.client.ask",
    "ThreadStartRefused": "weft.client.starts",
    "ScheduleError": "weft.client.schedules",
    "Schedules": "weft.client.schedules",
    "TaskError": "weft.client.tasks",
    "ThreadNotFound": "weft.activities.thread_deletion",
    "QuotaExceeded": "weft.store.tenant_quotas",
    "DeletionReport": "weft.activities.thread_deletion",
    "Tasks": "weft.client.tasks",
    "TaskRecord": "weft.contract.tasks",
    "JobError": "weft.client.jobs",
    "Jobs": "weft.client.jobs",
    "JobRecord": "weft.contract.jobs",
    "RespondActionResult": "weft.contract.actions",
    "Event": "weft.contract.events",
    "ForkRefused": "weft.contract.forks",
    "ForkResult": "weft.contract.forks",
    "McpServerDef": "weft.contract.mcp",
    "ThreadOptions": "weft.contract.thread",
    "ThreadRead": "weft.contract.thread",
    "ThreadResult": "weft.contract.thread",
    "StopReason": "weft.contract.turns",
    "TurnResult": "weft.contract.turns",
    "UsageTotals": "weft.contract.turns",
    "connect": "weft._connect",
    "Thread": "weft._thread",
    "import_thread": "weft._thread",
    "BundleRef": "weft.client.bundles",
    "BundleError": "weft.contract.bundles",
    "Worker": "weft._worker",
    "ProviderConfig": "weft.workers.config",
    "WeftConfig": "weft.workers.config",
    "SearchAttributesMissing": "weft.workers.search_attributes",
}

if TYPE_CHECKING:
    from weft._connect import connect
    from weft._thread import Thread, import_thread
    from weft._worker import Worker
    from weft.activities.crypto import Keyring
    from weft.activities.thread_deletion import DeletionReport, ThreadNotFound
    from weft.client.ask import ThreadFailed, TurnWaitTimeout
    from weft.client.bundles import BundleRef
    from weft.client.jobs import JobError, Jobs
    from weft.client.schedules import ScheduleError, Schedules
    from weft.client.starts import ThreadStartRefused
    from weft.client.tasks import TaskError, Tasks
    from weft.contract.actions import RespondActionResult
    from weft.contract.bundles import BundleError
    from weft.contract.events import Event
    from weft.contract.forks import ForkRefused, ForkResult
    from weft.contract.jobs import JobRecord
    from weft.contract.mcp import McpServerDef
    from weft.contract.tasks import TaskRecord
    from weft.contract.thread import ThreadOptions, ThreadRead, ThreadResult
    from weft.contract.turns import StopReason, TurnResult, UsageTotals
    from weft.definitions import (
        DefinitionError,
        Definitions,
        FunctionEffect,
        FunctionHook,
        FunctionTool,
        HookBlocked,
        define_agent,
        define_effect,
        define_hook,
        define_model,
        define_prompt,
        define_tool,
    )
    from weft.store import Store
    from weft.store.tenant_quotas import QuotaExceeded
    from weft.workers.config import ProviderConfig, WeftConfig
    from weft.workers.search_attributes import SearchAttributesMissing


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weft' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


__all__ = [
    "BundleError",
    "BundleRef",
    "DefinitionError",
    "DeletionReport",
    "Definitions",
    "Event",
    "ForkRefused",
    "ForkResult",
    "FunctionEffect",
    "FunctionHook",
    "FunctionTool",
    "HookBlocked",
    "JobError",
    "JobRecord",
    "Jobs",
    "Keyring",
    "McpServerDef",
    "ProviderConfig",
    "QuotaExceeded",
    "RespondActionResult",
    "ScheduleError",
    "Schedules",
    "SearchAttributesMissing",
    "StopReason",
    "Store",
    "TaskError",
    "TaskRecord",
    "Tasks",
    "Thread",
    "ThreadFailed",
    "ThreadNotFound",
    "ThreadOptions",
    "ThreadRead",
    "ThreadResult",
    "ThreadStartRefused",
    "TurnResult",
    "TurnWaitTimeout",
    "UsageTotals",
    "WeftConfig",
    "Worker",
    "connect",
    "define_agent",
    "define_effect",
    "define_hook",
    "define_model",
    "define_prompt",
    "define_tool",
    "import_thread",
]
