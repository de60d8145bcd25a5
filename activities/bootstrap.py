"""TEMPORARY shim: `activities.variables_request`, until workers/ is migrated."""

from activities.variables_request import VariableRequestActivities as BootstrapActivities

__all__ = ["BootstrapActivities"]
