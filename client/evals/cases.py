"""A suite on disk: every `*.yaml` / `*.yml` file of a folder is one case."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import ValidationError

from weft.contract.evals import EvalCase, Expectations
from weft.definitions import Definitions


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
        raise SuiteError(f"{path}: {_problem(err)}") from None
    for where, schema in _schemas(case):
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as err:
            raise SuiteError(f"{path}: field '{where}': not a JSON Schema: {err.message}") from None
    if case.bundle is not None:  # relative to the case file, wherever the run starts
        case = case.model_copy(update={"bundle": str((path.parent / case.bundle).resolve())})
    case = case if case.name else case.model_copy(update={"name": path.stem})
    return case.from_file(str(path))


def _problem(err: ValidationError) -> str:
    """The first problem, naming its field; a rule of the whole case names its fields."""
    problem = err.errors()[0]
    message = str(problem["msg"]).removeprefix("Value error, ")
    if not problem["loc"]:
        return message
    return f"field '{'.'.join(str(part) for part in problem['loc'])}': {message}"


def _expectations(case: EvalCase) -> list[tuple[str, Expectations]]:
    """Every expectation block of the case, with its field path."""
    found = [("expect", case.expect)]
    found += [(f"turns.{i}.expect", t.expect) for i, t in enumerate(case.turns) if t.expect]
    return found


def _schemas(case: EvalCase) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{where}.schema", e.schema_) for where, e in _expectations(case) if e.schema_]


def check_against(cases: list[EvalCase], definitions: Definitions) -> None:
    """Refuse, naming the file and the field, a case whose agent or rubric model the
    definitions under test do not have: found now rather than once its case has run."""
    agents = ", ".join(sorted(definitions.agents)) or "(none)"
    models = ", ".join(sorted(definitions.models)) or "(none)"
    for case in cases:
        if case.agent is not None and case.agent not in definitions.agents:
            raise SuiteError(
                f"{case.source}: field 'agent': {case.agent!r} is not an agent of the "
                f"definitions under test; agents: {agents}"
            )
        for where, expect in _expectations(case):
            rubric = expect.rubric
            if rubric is not None and rubric.model not in definitions.models:
                raise SuiteError(
                    f"{case.source}: field '{where}.rubric.model': {rubric.model!r} is not a "
                    f"model of the definitions under test; models: {models}"
                )


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
