"""TEMPORARY shim: `store.variable_requests`, until workers/ and tests are migrated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.store.store import Store
from activities.store.variable_requests import (
    MAX_VALUE_BYTES,
    AlreadyProvided,
    BootstrapError,
    InvalidValues,
    NotProvided,
    RequestNotFound,
    check_values,
)
from contract.subagents import VariableRequest

__all__ = [
    "MAX_VALUE_BYTES",
    "AlreadyProvided",
    "BootstrapError",
    "InvalidValues",
    "NotProvided",
    "RequestNotFound",
    "check_values",
]


def create_request(store: Store, request: VariableRequest) -> VariableRequest:
    return store.variable_requests.create(request)


def get_request(
    store: Store, request_id: str, *, parent_thread_id: str | None = None
) -> VariableRequest | None:
    return store.variable_requests.get(request_id, parent_thread_id=parent_thread_id)


def provide_values(
    store: Store, request_id: str, values: Mapping[str, Any], *, parent_thread_id: str | None = None
) -> VariableRequest:
    return store.variable_requests.provide(request_id, values, parent_thread_id=parent_thread_id)


def withdraw_values(store: Store, request_id: str) -> None:
    store.variable_requests.withdraw(request_id)


def take_values(store: Store, request_id: str) -> dict[str, Any]:
    return store.variable_requests.provided_values(request_id)
