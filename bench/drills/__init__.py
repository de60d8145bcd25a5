"""The full-size fault drills run by bench/bench_drills.py, one module per drill."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from drills import drain, eviction, model_faults, recovery, restart, sigkill
from drills.common import Report

Drill = Callable[[Report, argparse.Namespace], Awaitable[None]]

DRILLS: dict[str, Drill] = {
    "sigkill": sigkill.run,
    "restart": restart.run,
    "eviction": eviction.run,
    "faults": model_faults.run,
    "drain": drain.run,
    "recovery": recovery.run,
}
