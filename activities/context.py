"""The system prompt of a request (Runtime §4): a prompt's parts rendered with its env.

The transcript's side of the request, each message as the model reads it, is
activities/message_views.py.
"""

from __future__ import annotations

from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.thread_env import EnvEntry, model_visible


def render_prompt(prompt: PromptDef, snapshot: DefinitionSnapshot, env: dict[str, EnvEntry]) -> str:
    """The system prompt text; env parts show only non-secret values."""
    if isinstance(prompt.prompt, str):
        return prompt.prompt
    pieces = []
    for part in prompt.prompt:
        if part.type == "text":
            pieces.append(part.content or "")
        elif part.type == "include" and part.prompt in snapshot.prompts:
            pieces.append(render_prompt(snapshot.prompts[part.prompt], snapshot, env))
        elif part.type == "env" and part.property:
            pieces.append(model_visible(env, part.property))
    return "".join(pieces)
