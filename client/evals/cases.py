"""A suite on disk: every `*.yaml` / `*.yml` file of a folder is one case."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from weft.contract.evals import EvalCase
from weft.contract.validation import describe_validation_error


class SuiteError(ValueError):
    """A suite that cannot be read: the message names the file and the field."""


def case_files(suite: Path) -> list[Path]:
    """The suite's case files, in name order."""
    if not suite.is_dir():
        raise SuiteError(f"eval suite {suite}: not a folder")
    files = sorted(p for p in suite.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise SuiteError(f"eval suite {suite}: no *.yaml case files")
    return files


def load_case(path: Path) -> EvalCase:
    """One case file, its name defaulting to the file's stem."""
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SuiteError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: a case is a mapping (agent, turns or recorded, expect)")
    try:
        case = EvalCase.model_validate(data)
    except ValidationError as err:
        raise SuiteError(f"{path}: {describe_validation_error(err, limit=1)}") from None
    if case.bundle is not None:  # relative to the case file, wherever the run starts
        case = case.model_copy(update={"bundle": str((path.parent / case.bundle).resolve())})
    return case if case.name else case.model_copy(update={"name": path.stem})


def load_suite(suite: Path) -> list[EvalCase]:
    """Every case of the suite; two cases with one name are refused."""
    cases = [load_case(path) for path in case_files(suite)]
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise SuiteError(f"eval suite {suite}: two cases are named {case.name!r}")
        seen.add(case.name)
    return cases


def suite_digest(cases: list[EvalCase], definitions: Any, tools: str | None) -> str:
    """What a finished result is valid for: the cases, the definitions under test (their
    snapshot JSON) and the tool mode. A re-run with the same digest skips finished cases."""
    hashed = hashlib.sha256()
    for case in cases:
        hashed.update(case.model_dump_json().encode())
    hashed.update(json.dumps(definitions, sort_keys=True, default=str).encode())
    hashed.update(str(tools).encode())
    return hashed.hexdigest()[:16]
