"""A tool with an external effect: it charges through a loopback ledger with its idempotency
key, then waits there until released, so a worker can be killed between the two."""

import httpx
from pydantic import BaseModel

from weft.definitions import define_tool


class ChargeArgs(BaseModel):
    amount: int


async def charge_once(state, args: ChargeArgs) -> dict:
    # trust_env off: a proxy from the environment must not take loopback requests.
    async with httpx.AsyncClient(
        base_url=state.env("LEDGER_URL"), timeout=60, trust_env=False
    ) as http:
        charged = await http.post(
            "/charges",
            json={"amount": args.amount, "toolCallId": state.tool_call_id},
            headers={"Idempotency-Key": state.idempotency_key},
        )
        charged.raise_for_status()
        (await http.post("/gate")).raise_for_status()  # held until the test releases it
    return charged.json()


tool = define_tool(
    description="Charge an amount, exactly once", args=ChargeArgs, execute=charge_once
)
