"""`weft code run` as a real subprocess: one JSON object out, exit 0, usage errors exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "weft.cli.code_command", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_prints_the_result_as_one_json_object(tmp_path: Path) -> None:
    """A successful run prints one camelCase JSON object and exits 0."""
    script = tmp_path / "main.ts"
    script.write_text("const n: number = 41;\nconsole.log('hi');\nexport default n + 1;\n")
    proc = _cli("run", str(script))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["status"], out["result"], out["logs"][0]["args"]) == ("success", 42, ["hi"])
    assert "durationMs" in out


def test_cli_exits_zero_for_error_statuses(tmp_path: Path) -> None:
    """A link_error run still exits 0; the status is in the JSON."""
    script = tmp_path / "bad.ts"
    script.write_text("import x from 'https://example.com/x.js';\n")
    proc = _cli("run", str(script))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["status"] == "link_error"


def test_cli_applies_options_and_terminate_after(tmp_path: Path) -> None:
    """--options is read as runCode options; --terminate-after-ms terminates the run."""
    script = tmp_path / "loop.js"
    script.write_text("export default function (n) { while (true) {} }\n")
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"execute": {"fn": "default", "args": [1]}}))
    proc = _cli("run", str(script), "--options", str(options), "--terminate-after-ms", "100")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["status"], out["error"]["name"]) == ("terminated", "Terminated")


def test_cli_usage_errors_exit_two(tmp_path: Path) -> None:
    """A missing file or malformed options JSON exits 2 with a message on stderr."""
    missing = _cli("run", str(tmp_path / "nope.ts"))
    assert missing.returncode == 2 and "nope.ts" in missing.stderr
    script = tmp_path / "ok.ts"
    script.write_text("export default 1")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    malformed = _cli("run", str(script), "--options", str(bad))
    assert malformed.returncode == 2 and "not valid JSON" in malformed.stderr
    assert _cli("run").returncode == 2
