"""`weft.evals.run_suite` on authored YAML cases: passing and failing expectations with
readable reasons, the report's table, JSON and JUnit XML, and the pass-rate gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml
from support import add_script, agent_definitions
from temporalio.client import Client

from weft import evals
from weft.client.evals.expect import subset
from weft.client.evals.report import junit_xml, render_table
from weft.contract.evals import EvalCase, EvalReport
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

WEATHER_SCRIPT = {
    "turns": [
        {"match": "regex:^Rubric:", "replies": [{"text": '{"score": 0.9, "reason": "on topic"}'}]},
        {
            "match": "regex:(?i)weather",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {
                    "text": "It is sunny in Paris, 21 C.",
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            ],
        },
        {"match": "*", "replies": [{"text": '{"answer": 42}'}]},
    ]
}


def _suite(folder: Path, cases: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, case in cases.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(case))
    return folder


async def _run(
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    weft_config: WeftConfig,
    suite: Path,
    **kw: Any,
) -> EvalReport:
    definitions = agent_definitions(add_script(scripted_server, WEATHER_SCRIPT))
    return await evals.run_suite(
        temporal_client,
        suite,
        definitions,
        config=weft_config,
        scripted=scripted_server,
        results=suite.parent / "results",
        **kw,
    )


async def test_authored_cases_pass_and_fail_with_reasons(
    temporal_client, scripted_server, weft_config, tmp_path
):
    """A passing case checks answer, tool calls by JSON subset, schema and limits; a failing
    one names each expectation it missed, with what the run did instead."""
    suite = _suite(
        tmp_path / "suite",
        {
            "good": {
                "agent": "helper",
                "turns": [
                    {
                        "user": "Weather in Paris?",
                        "expect": {
                            "contains": "sunny",
                            "matches": r"\d+ C",
                            "toolCalls": {
                                "equal": [{"name": "weather", "arguments": {"city": "Paris"}}]
                            },
                        },
                    },
                    {
                        "user": "And the answer?",
                        "expect": {"schema": {"type": "object", "required": ["answer"]}},
                    },
                ],
                "expect": {
                    "maxSteps": 5,
                    "maxTokens": 1000,
                    "toolCalls": {"exclude": [{"name": "note"}]},
                },
            },
            "bad": {
                "agent": "helper",
                "turns": [
                    {
                        "user": "Weather please",
                        "expect": {
                            "contains": "rain",
                            "toolCalls": {
                                "include": [{"name": "weather", "arguments": {"city": "Oslo"}}]
                            },
                        },
                    }
                ],
                "expect": {"maxSteps": 1},
            },
        },
    )
    report = await _run(temporal_client, scripted_server, weft_config, suite)
    by_name = {case.name: case for case in report.cases}
    assert by_name["good"].passed, by_name["good"].checks
    bad = by_name["bad"]
    assert not bad.passed and not report.ok and report.pass_rate == 0.5
    failed = {c.name: c.detail for c in bad.checks if not c.passed}
    assert failed["contains 'rain'"] == "answer was 'It is sunny in Paris, 21 C.'"
    assert failed["toolCalls.include"] == (
        'expected weather({"city":"Oslo"}); got weather({"city":"Paris"})'
    )
    assert failed["maxSteps"] == "2 > 1"
    table = render_table(report)
    assert "bad" in table and "FAIL" in table and "turn 1: contains 'rain'" in table
    assert "1/2 passed (50%)" in table
    xml = ElementTree.fromstring(junit_xml(report).split("?>", 1)[1])
    assert xml.get("tests") == "2" and xml.get("failures") == "1"
    failure = xml.find("testcase[@name='bad']/failure")
    assert failure is not None and "contains 'rain'" in (failure.text or "")
    data = json.loads(evals.report_json(report))
    assert data["passRate"] == 0.5 and data["ok"] is False


async def test_min_pass_rate_and_rubric(temporal_client, scripted_server, weft_config, tmp_path):
    """A model-graded rubric records its score and reason; --min-pass-rate decides `ok`."""
    suite = _suite(
        tmp_path / "suite",
        {
            "graded": {
                "agent": "helper",
                "turns": [{"user": "Weather in Paris?"}],
                "expect": {
                    "rubric": {"prompt": "grade: is it about weather?", "model": "scripted"}
                },
            },
            "failing": {
                "agent": "helper",
                "turns": [{"user": "hi"}],
                "expect": {"contains": "nope"},
            },
        },
    )
    report = await _run(temporal_client, scripted_server, weft_config, suite, min_pass_rate=0.5)
    graded = next(c for c in report.cases if c.name == "graded")
    assert graded.error is None, graded.error
    rubric = next(c for c in graded.checks if c.name == "rubric")
    assert rubric.passed and rubric.score == 0.9 and "on topic" in rubric.detail
    assert report.pass_rate == 0.5 and report.ok
    report.min_pass_rate = 0.6
    assert not report.ok


def test_bad_case_is_refused_naming_the_field(tmp_path):
    """A case file with a wrong field is one error naming the file and the field."""
    from weft.client.evals.cases import SuiteError, load_suite

    suite = _suite(tmp_path / "s", {"c": {"agent": "helper", "turns": [{"usr": "hi"}]}})
    with pytest.raises(SuiteError, match=r"c.yaml: field 'turns.0.user'"):
        load_suite(suite)
    assert EvalCase.model_validate({"recorded": "t-1"}).tools is None


def test_json_subset():
    """Arguments match by JSON subset: extra keys are fine, other values are not."""
    assert subset({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not subset({"a": [1]}, {"a": [1, 2]})
    assert not subset({"a": 1}, {"b": 1})


async def test_fixtures_reach_the_thread(temporal_client, scripted_server, weft_config, tmp_path):
    """KV fixtures are in the thread's store before its first turn (the live tool reads and
    extends them), and file fixtures are in its filesystem."""
    from weft.store import Store

    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "c"}}]},
                {"text": "noted"},
            ]
        },
    )
    case = {
        "agent": "helper",
        "fixtures": {"kv": {"notes": ["a", "b"]}, "files": {"/docs/readme.md": "hello"}},
        "turns": [{"user": "note c", "expect": {"toolCalls": {"equal": [{"name": "note"}]}}}],
    }
    suite = _suite(tmp_path / "suite", {"fixtures": case})
    report = await evals.run_suite(
        temporal_client,
        suite,
        agent_definitions(script),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    (result,) = report.cases
    assert result.passed, (result.error, result.checks)
    assert result.thread_id is not None, "a case that ran names its thread"
    store = Store.open(weft_config.store_url())
    try:
        assert store.values.get(result.thread_id, "notes") == ["a", "b", "c"]
        assert store.files.read_file(result.thread_id, "/docs/readme.md") == b"hello"
    finally:
        store.close()
