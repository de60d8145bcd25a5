"""The benchmark's tool: as cheap as a tool gets, so what is measured is the runtime."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class AddArgs(BaseModel):
    a: int
    b: int


async def add(state: ThreadState, args: AddArgs) -> int:
    return args.a + args.b


tool = define_tool(description="Add two integers", args=AddArgs, execute=add)
