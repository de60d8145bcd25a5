"""Agent, prompt, model and tool definitions: loading, validation and snapshots."""

from activities.definitions.api import (
    FunctionTool,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from activities.definitions.definition_set import Definitions
from activities.definitions.errors import DefinitionError
from activities.definitions.loader import load_directory

__all__ = [
    "DefinitionError",
    "Definitions",
    "FunctionTool",
    "define_agent",
    "define_model",
    "define_prompt",
    "define_tool",
    "load_directory",
]
