"""Helpers for the runCode sandbox tests."""

from __future__ import annotations

from weft.activities.sandbox import CodeError, CodeExecutionResult


def error_of(result: CodeExecutionResult) -> CodeError:
    """The error of a run that failed; the test fails here if the run did not."""
    assert result.error is not None, f"expected a failed run, got {result.status}"
    return result.error
