"""A packing list for a forecast; remembers the last list in the thread's key-value store."""

from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class PackingArgs(BaseModel):
    sky: str
    celsius: float


async def packing_list(state: ThreadState, args: PackingArgs) -> list[str]:
    items = ["passport", "charger"]
    items += ["umbrella"] if "rain" in args.sky else []
    items += ["warm coat"] if args.celsius < 10 else ["light jacket"]
    await state.set_value("last_packing_list", items)
    return items


tool = define_tool(
    description="What to pack for a forecast", args=PackingArgs, execute=packing_list
)
