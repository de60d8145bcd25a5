"""Fixtures for the runCode sandbox tests: one warm pool shared by the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from weft.activities.sandbox import SandboxPool


@pytest.fixture(scope="session")
def pool() -> Iterator[SandboxPool]:
    """A small warm pool; the tests run sequentially, so two workers keep it fast."""
    with SandboxPool(size=2, max_workers=4) as warm:
        yield warm
