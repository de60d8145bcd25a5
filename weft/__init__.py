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

from weft._layout import check_layout

check_layout()

# The imports below need weft's internal top-level packages, checked just above.
from activities.crypto import Keyring  # noqa: E402
from activities.definitions import (  # noqa: E402
    DefinitionError,
    Definitions,
    FunctionHook,
    FunctionTool,
    HookBlocked,
    define_agent,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)
from activities.store import Store  # noqa: E402
from client.ask import TurnWaitTimeout  # noqa: E402
from contract.actions import RespondActionResult  # noqa: E402
from contract.events import Event  # noqa: E402
from contract.thread import ThreadOptions, ThreadRead, ThreadResult  # noqa: E402
from contract.turns import StopReason, TurnResult, UsageTotals  # noqa: E402
from weft._connect import connect  # noqa: E402
from weft._thread import Thread  # noqa: E402
from weft._worker import Worker  # noqa: E402
from workers.config import ProviderConfig, WeftConfig  # noqa: E402
from workers.search_attributes import SearchAttributesMissing  # noqa: E402

__all__ = [
    "DefinitionError",
    "Definitions",
    "Event",
    "FunctionHook",
    "FunctionTool",
    "HookBlocked",
    "Keyring",
    "ProviderConfig",
    "RespondActionResult",
    "SearchAttributesMissing",
    "StopReason",
    "Store",
    "Thread",
    "ThreadOptions",
    "ThreadRead",
    "ThreadResult",
    "TurnResult",
    "TurnWaitTimeout",
    "UsageTotals",
    "WeftConfig",
    "Worker",
    "connect",
    "define_agent",
    "define_hook",
    "define_model",
    "define_prompt",
    "define_tool",
]
