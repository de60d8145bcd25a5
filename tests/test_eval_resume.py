"""`weft eval` as a real subprocess: the exit code, JUnit and JSON of a failing suite, and
a run killed with SIGKILL mid-suite that a re-run resumes, skipping finished cases."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from xml.etree import ElementTree

import yaml
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

WEFT = Path(sys.executable).parent / "weft"


def _project(tmp_path: Path, address: str) -> Path:
    """Definitions on disk (a slow scripted model) and a config file for them."""
    defs = tmp_path / "defs"
    for folder, name, body in [
        ("agents", "greeter", {"sideA": {"prompt": "greeter_prompt"}}),
        (
            "prompts",
            "greeter_prompt",
            {"toolDescription": "greets", "model": "slowly", "prompt": "Greet."},
        ),
        ("models", "slowly", {"provider": "scripted", "model": "slowly"}),
    ]:
        (defs / folder).mkdir(parents=True, exist_ok=True)
        (defs / folder / f"{name}.yaml").write_text(yaml.safe_dump(body))
    (defs / "scripts").mkdir()
    reply = {"text": "Hello there, friend.", "chunk_size": 4, "chunk_delay_ms": 60}
    (defs / "scripts" / "slowly.yaml").write_text(yaml.safe_dump({"slowly": {"replies": [reply]}}))
    config = {
        "temporal": {"address": address, "taskQueue": "unused-by-eval"},
        "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
        "definitions": str(defs),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(defs / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _suite(folder: Path, cases: Mapping[str, Mapping[str, object]]) -> Path:
    folder.mkdir()
    for name, case in cases.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(case))
    return folder


async def _weft(config: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(WEFT),
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=180)
    return process.returncode or 0, out.decode(), err.decode()


async def test_failing_suite_exits_non_zero_with_junit(dev_server, tmp_path):
    """A failing expectation exits 1 with a readable line and JUnit XML; --min-pass-rate
    met exits 0; a bad flag exits 2 naming it."""
    config = _project(tmp_path, dev_server.address)
    hello = {"agent": "greeter", "turns": [{"user": "hi", "expect": {"contains": "Hello"}}]}
    wrong = {"agent": "greeter", "turns": [{"user": "hi", "expect": {"contains": "Goodbye"}}]}
    suite = _suite(tmp_path / "suite", {"hello": hello, "wrong": wrong})
    junit = tmp_path / "junit.xml"
    code, out, err = await _weft(config, "eval", str(suite), "--junit", str(junit))
    assert code == 1, (out, err)
    assert "turn 1: contains 'Goodbye': answer was 'Hello there, friend.'" in out
    assert "1/2 passed (50%)" in out
    # Not a terminal: one plain line per case, no progress bar.
    assert "2/2 " in err and ": FAIL" in err and "[#" not in err and "\r" not in err, err
    root = ElementTree.parse(junit).getroot()
    assert root.get("tests") == "2" and root.get("failures") == "1"
    code, out, err = await _weft(config, "eval", str(suite), "--json", "--min-pass-rate", "0.5")
    assert code == 0, (out, err)
    data = json.loads(out)
    assert data["passRate"] == 0.5 and data["skipped"] == 2, "the second run reran cases"
    code, _, err = await _weft(config, "eval", str(suite), "--min-pass-rate", "2")
    assert code == 2 and "--min-pass-rate must be between 0 and 1" in err


async def _running_in_flight(client: Client, results: Path) -> list[str]:
    """The threads the results folder marks in flight that are running."""
    running = []
    for marker in results.glob("*.inflight"):
        thread_id = json.loads(marker.read_text())["threadId"]
        try:
            described = await client.get_workflow_handle(thread_id).describe()
        except RPCError:  # not started yet
            continue
        if described.status == WorkflowExecutionStatus.RUNNING:
            running.append(thread_id)
    return running


async def test_killed_eval_resumes(dev_server, temporal_client, tmp_path):
    """SIGKILL after some case results exist; the re-run keeps them, runs the rest, ends
    the thread the killed run left open, and exits 0 with every case reported."""
    config = _project(tmp_path, dev_server.address)
    case = {"agent": "greeter", "turns": [{"user": "hi", "expect": {"contains": "Hello"}}]}
    suite = _suite(tmp_path / "suite", {f"case{i}": case for i in range(8)})
    results = tmp_path / "results"
    process = await asyncio.create_subprocess_exec(
        str(WEFT),
        "--config",
        str(config),
        "eval",
        str(suite),
        "--concurrency",
        "1",
        "--results",
        str(results),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        # Killed once two results exist and a third case's thread is running.
        async with asyncio.timeout(60):
            while process.returncode is None and not (
                len(list(results.glob("*.json"))) >= 2
                and await _running_in_flight(temporal_client, results)
            ):
                await asyncio.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        await process.wait()
    kept = {p.name: p.read_text() for p in results.glob("*.json")}
    assert 2 <= len(kept) < 8, f"the kill came too late to prove a resume: {sorted(kept)}"
    (orphan,) = await _running_in_flight(temporal_client, results)
    handle = temporal_client.get_workflow_handle(orphan)
    code, out, err = await _weft(config, "eval", str(suite), "--json", "--results", str(results))
    assert code == 0, (out, err)
    data = json.loads(out)
    assert data["skipped"] == len(kept) and len(data["cases"]) == 8 and data["ok"]
    for name, text in kept.items():  # finished cases were not run again
        assert (results / name).read_text() == text
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    assert not list(results.glob("*.inflight"))
