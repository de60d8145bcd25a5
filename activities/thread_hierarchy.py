"""ThreadState's hierarchy: the subagent registry, parent lookups and reports to the parent."""

from __future__ import annotations


class ThreadHierarchy:
    """Parent/child methods of ThreadState (Runtime §7.1, §8.2)."""
