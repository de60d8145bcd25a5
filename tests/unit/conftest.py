"""The `mem` fixture: a fresh thread's memory with its definitions loaded."""

from __future__ import annotations

import pytest
from unit_support import memory

from weft.workflows.thread_state import ThreadMemory


@pytest.fixture
def mem() -> ThreadMemory:
    return memory()
