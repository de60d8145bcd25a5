"""`weft worker` as a v2 build whose workflow code issues a command v1 never does: each run
it starts after a continue-as-new opens with a timer. Unpatched on purpose: a v1 run replayed
by this worker would fail as non-deterministic, so only pinning keeps v1 runs away from it.

Run as `python tests/deploy_worker_v2.py --config FILE worker --build-id v2`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from temporalio import workflow

from weft.cli.main import main
from weft.workflows import agent_thread

V2_TIMER_SUMMARY = "v2 build: a timer v1 never starts"

# The module's own function, looked up by name: mypy sees no export of it.
_STORE_CARRIED = "store_carried"


async def store_carried_v2(mem: Any, outbox: Any) -> None:
    """v1's first step of a continued run, after a timer v1 never starts."""
    await workflow.sleep(timedelta(milliseconds=1), summary=V2_TIMER_SUMMARY)
    await _V1_STORE_CARRIED(mem, outbox)


_V1_STORE_CARRIED = vars(agent_thread)[_STORE_CARRIED]


@contextmanager
def v2_build() -> Iterator[None]:
    """The v2 build's workflow code in this process, for the block. weft's workflows
    run outside the SDK's sandbox (workers/workflow_runner.py), so their runs see the
    module as set here."""
    vars(agent_thread)[_STORE_CARRIED] = store_carried_v2
    try:
        yield
    finally:
        vars(agent_thread)[_STORE_CARRIED] = _V1_STORE_CARRIED


if __name__ == "__main__":
    with v2_build():
        sys.exit(main(sys.argv[1:]))
