"""The worker process's garbage collector: what it finds at start-up it leaves alone.

A full collection walks every container object the process holds. A worker holds a few
hundred thousand from start-up alone (the modules of weft, Temporal, pydantic and
SQLAlchemy, the definitions, the workflow sandbox), none of them ever garbage, and the
collector walked them all again each time: 130 to 190 ms a full collection, one every
80 to 160 steps of a quiet thread, a pause that lands on whichever step runs then
(`bench/bench_floor.py`: 2.3 ms a step of pure collection at K=80). `gc.freeze`
moves what exists once the worker is built into a generation the collector skips; later
collections walk only what the worker made since. Objects frozen stay alive for the life
of the process, so a collection runs first: only live start-up state is frozen.

Once per process: a process that builds workers one after another (tests, an embedding
application) pays the collection once; what later workers build is not frozen.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)


_frozen = False


def freeze_startup_heap() -> int:
    """The first time in this process: collect, then keep every object alive now out of
    later collections. How many objects are frozen (0 when an earlier call froze them)."""
    global _frozen
    if _frozen:
        return 0
    _frozen = True
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.debug("gc: %d start-up objects frozen out of later collections", frozen)
    return frozen
