"""ThreadState's file API: each thread's own filesystem, backed by the store."""

from __future__ import annotations


class ThreadFiles:
    """File methods of ThreadState (`write_file`, `read_file`, …); see the store's files."""
