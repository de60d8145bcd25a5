"""The benchmark's tool: as cheap as a tool gets, so what is measured is the runtime.

`WEFT_BENCH_QUICK_TOOLS=1` (the benches' `--quick-tools`, bench/scenario.py) defines it
`quick`: its calls run as local activities (docs/defining-agents.md, "Quick tools")."""

import os

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class AddArgs(BaseModel):
    a: int
    b: int


async def add(state: ThreadState, args: AddArgs) -> int:
    return args.a + args.b


tool = define_tool(
    description="Add two integers",
    args=AddArgs,
    execute=add,
    quick=os.environ.get("WEFT_BENCH_QUICK_TOOLS") == "1",
)
