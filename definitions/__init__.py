"""Agent, prompt, model, tool, hook and effect definitions: loading, validation and snapshots."""

from weft.definitions.api import (
    FunctionEffect,
    FunctionHook,
    FunctionTool,
    HookBlocked,
    define_agent,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)
from weft.definitions.definition_set import Definitions
from weft.definitions.errors import DefinitionError
from weft.definitions.loader import load_directory

__all__ = [
    "DefinitionError",
    "Definitions",
    "FunctionEffect",
    "FunctionHook",
    "FunctionTool",
    "HookBlocked",
    "define_agent",
    "define_effect",
    "define_hook",
    "define_model",
    "define_prompt",
    "define_tool",
    "load_directory",
]
