"""Placeholders in scripted tool-call arguments, filled from the request being answered.

A script cannot know ids the runtime makes up, such as the ref of an output the model saw
only as a preview. An argument string value `"{{preview.ref}}"` or `"{{preview.offset}}"`
becomes the ref and next offset named by the newest preview notice in the request;
`"{{page.next_offset}}"` the `nextOffset` of the newest `read_output` page. A placeholder
with nothing to fill it stays as it is, so the runtime's own argument checks answer it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from weft.workers.scripted_model.conversation import View

_NOTICE = re.compile(r'call read_output with \{"ref": "([^"]+)", "offset": (\d+)\}')
_NEXT_OFFSET = re.compile(r'"nextOffset"\s*:\s*(\d+)')


def fill(arguments: str, view: View) -> str:
    """`arguments` (JSON text) with each known placeholder replaced by its JSON value."""
    if "{{" not in arguments:
        return arguments
    for name, value in _values(view).items():
        arguments = arguments.replace(json.dumps("{{" + name + "}}"), json.dumps(value))
    return arguments


def _values(view: View) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for said in view.messages:
        for ref, offset in _NOTICE.findall(said.text):
            values["preview.ref"], values["preview.offset"] = ref, int(offset)
        if said.role == "tool":
            for offset in _NEXT_OFFSET.findall(said.text):
                values["page.next_offset"] = int(offset)
    return values
