"""A model call does not search the import path: every module it needs is loaded once.

httpcore imports `sniffio` inside each lock and cancel shield it builds; when the package
is missing, each of those imports fails anew after statting every sys.path entry, a cost
paid on every model call (a profile found it in 13 % of model.call's CPU).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

from providers_support import AddScript

from weft.activities.providers import ChatRequest, OpenAIChatProvider


class ImportWatch(MetaPathFinder):
    """Records every module name the import system has to look for."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        self.names.append(fullname)
        return None


async def test_a_streamed_model_call_imports_nothing(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """After a first call has loaded what it needs, the next one looks up no module."""
    model = add_script({"replies": [{"text": "streamed in chunks", "chunk_size": 4}]})
    request = ChatRequest(model=model, messages=[{"role": "user", "content": "hi"}])
    await openai.complete(request)  # the script answers each request the same way
    watch = ImportWatch()
    sys.meta_path.insert(0, watch)
    try:
        reply = await openai.complete(request)
    finally:
        sys.meta_path.remove(watch)
    assert reply.content == "streamed in chunks"
    assert watch.names == []
