"""Hooks (Standard Agents): the runner of one point, the worker's registry, the message
hooks and the repair of tool pairs after a filter. See docs/hooks.md."""

from activities.hooks.pairs import repair_pairs
from activities.hooks.registry import HookRegistry, scope_of
from activities.hooks.runner import HookOutcome, HookRunner

__all__ = ["HookOutcome", "HookRegistry", "HookRunner", "repair_pairs", "scope_of"]
