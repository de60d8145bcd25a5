"""A tool with an external effect: it charges through a loopback ledger with its idempotency
key, then waits there until released, so a worker can be killed between the two."""

from typing import Any

import httpx
from pydantic import BaseModel

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool


class ChargeArgs(BaseModel):
    amount: int


async def charge_once(state: ThreadState, args: ChargeArgs) -> dict[str, Any]:
    ledger_url, key = state.env("LEDGER_URL"), state.idempotency_key
    if not ledger_url or key is None:
        raise ValueError("charge_once needs LEDGER_URL in the env and runs only as a tool call")
    # trust_env off: a proxy from the environment must not take loopback requests.
    async with httpx.AsyncClient(base_url=ledger_url, timeout=60, trust_env=False) as http:
        charged = await http.post(
            "/charges",
            json={"amount": args.amount, "toolCallId": state.tool_call_id},
            headers={"Idempotency-Key": key},
        )
        charged.raise_for_status()
        (await http.post("/gate")).raise_for_status()  # held until the test releases it
    receipt: dict[str, Any] = charged.json()
    return receipt


tool = define_tool(
    description="Charge an amount, exactly once", args=ChargeArgs, execute=charge_once
)
