"""What `weft eval` promises without a server: a bad case file is refused naming the file
and the field, JUnit XML parses whatever the answers hold, and the progress bar is drawn
on a terminal only."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml
from support import agent_definitions

from weft.cli.eval_command import Progress
from weft.client.evals.cases import SuiteError, check_against, load_case, load_suite
from weft.client.evals.report import junit_xml
from weft.contract.evals import CaseResult, Check, EvalReport


def _case(tmp_path: Path, body: dict[str, Any], name: str = "case") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            {"agent": "helper", "turns": [{"user": "hi", "expect": {"matches": "(open"}}]},
            r"case.yaml: field 'turns.0.expect.matches': not a regular expression: missing \)",
        ),
        (
            {"agent": "helper", "turns": [{"user": "hi"}], "expect": {"schema": {"type": "obj"}}},
            r"case.yaml: field 'expect.schema': not a JSON Schema: ",
        ),
        (
            {"recorded": "t-1", "turns": [{"user": "hi"}]},
            r"case.yaml: a case needs one of `turns` \(authored\), `recorded`",
        ),
        (
            {"agent": "helper", "turns": [{"user": "hi", "expcet": {}}]},
            r"case.yaml: field 'turns.0.expcet': Extra inputs are not permitted",
        ),
    ],
)
def test_a_bad_case_file_names_the_file_and_the_field(tmp_path, body, error):
    """A regex that does not compile, a schema that is no JSON Schema, a rule of the whole
    case and a misspelt field are refused when the suite loads, naming file and field."""
    with pytest.raises(SuiteError, match=error):
        load_case(_case(tmp_path, body))


def test_cases_are_checked_against_the_definitions(tmp_path):
    """An agent or a rubric model the definitions under test lack is refused before any
    case runs, naming the case's file and the field."""
    definitions = agent_definitions("script")
    _case(tmp_path, {"agent": "helpr", "turns": [{"user": "hi"}]}, "typo")
    with pytest.raises(SuiteError, match=r"typo.yaml: field 'agent': 'helpr' is not an agent"):
        check_against(load_suite(tmp_path), definitions)
    (tmp_path / "typo.yaml").unlink()
    rubric = {"prompt": "polite?", "model": "gpt"}
    _case(tmp_path, {"agent": "helper", "turns": [{"user": "hi", "expect": {"rubric": rubric}}]})
    with pytest.raises(SuiteError, match=r"case.yaml: field 'turns.0.expect.rubric.model': 'gpt'"):
        check_against(load_suite(tmp_path), definitions)


def test_junit_parses_whatever_the_answer_holds():
    """An answer with terminal colours and a NUL still gives well-formed JUnit XML, with
    the characters XML cannot hold written as escapes."""
    check = Check(name="contains 'x'", passed=False, detail="answer was \x1b[1mbold\x00")
    case = CaseResult(name="c", passed=False, digest="d", checks=[check])
    xml = junit_xml(EvalReport(suite="s", digest="d", cases=[case]))
    failure = ElementTree.fromstring(xml.split("?>", 1)[1]).find("testcase/failure")
    assert failure is not None and failure.text == "contains 'x': answer was \\x1b[1mbold\\x00"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_in_a_log():
    """On a terminal the bar is redrawn in place and its line ended at the close; in a log
    each case is one plain line, with no bar."""
    passed = CaseResult(name="good", passed=True, digest="d")
    failed = CaseResult(name="bad", passed=False, digest="d")
    terminal, log = _Terminal(), io.StringIO()
    for stream in (terminal, log):
        progress = Progress(stream)
        progress(passed, 1, 2)
        progress(failed, 2, 2)
        progress.close()
    assert terminal.getvalue().startswith("\r[###") and terminal.getvalue().endswith("\n")
    assert "\r[" in terminal.getvalue()[1:] and "2/2 cases, 1 failed" in terminal.getvalue()
    assert log.getvalue() == "1/2 good: pass\n2/2 bad: FAIL\n"
