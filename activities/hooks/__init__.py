"""Hooks (Standard Agents): the runner of one point, the worker's registry, the message
hooks and the repair of tool pairs after a filter. See docs/hooks.md."""

from weft.activities.hooks.pairs import repair_pairs
from weft.activities.hooks.registry import HookRegistry, scope_of
from weft.activities.hooks.runner import HookOutcome, HookRunner

__all__ = ["HookOutcome", "HookRegistry", "HookRunner", "repair_pairs", "scope_of"]
