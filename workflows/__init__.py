"""Deterministic workflow code only: the AgentThread workflow and its pure helpers.

Imports here are limited to the standard library, temporalio's workflow-side modules,
pydantic and `contract` (enforced by ruff TID251 and tests/test_workflow_imports.py).
"""
