"""docs/scripted-model.md's command runs the scripted model server on its own, with the
doc's example scripts, and it answers chat completions by model name."""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
from pathlib import Path

import httpx

from weft.workers.dev_server import free_port

DOC = Path(__file__).resolve().parents[1] / "docs" / "scripted-model.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def documented_command() -> list[str]:
    """The doc's `python -m weft.workers.scripted_model ...` line, as arguments."""
    for block in _blocks("sh"):
        for line in block.splitlines():
            if line.startswith("python -m weft.workers.scripted_model"):
                return shlex.split(line)
    raise AssertionError("docs/scripted-model.md shows no `python -m` command")


async def test_the_documented_command_serves_the_documented_scripts(tmp_path):
    """The documented command, run in a folder holding the doc's my_scripts.yaml (its port
    moved to a free one), serves `greeter` and walks `weather-bot` through a tool call."""
    [example] = [b for b in _blocks("yaml") if b.startswith("# my_scripts.yaml")]
    (tmp_path / "my_scripts.yaml").write_text(example, encoding="utf-8")
    command = documented_command()
    command[0] = sys.executable
    port = free_port()
    command[command.index("--port") + 1] = str(port)
    process = await asyncio.create_subprocess_exec(
        *command, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert banner.strip() == f"scripted model server: OpenAI http://127.0.0.1:{port}/v1"
        base = banner.split()[-1]
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            hello = await http.post(
                "/chat/completions",
                json={"model": "greeter", "messages": [{"role": "user", "content": "hello"}]},
            )
            assert hello.status_code == 200, hello.text
            answer = hello.json()["choices"][0]["message"]["content"]
            assert answer == "Hello! Ask me about the weather."
            ask = [{"role": "user", "content": "What's the weather?"}]
            first = (
                await http.post("/chat/completions", json={"model": "weather-bot", "messages": ask})
            ).json()
            [call] = first["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == "get_weather"
            result = {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}
            second = await http.post(
                "/chat/completions",
                json={
                    "model": "weather-bot",
                    "messages": [*ask, first["choices"][0]["message"], result],
                },
            )
            assert second.json()["choices"][0]["message"]["content"] == "It is sunny in Paris."
            unknown = await http.post(
                "/chat/completions", json={"model": "gpt-4o", "messages": ask}
            )
            assert unknown.status_code == 404 and "no script named 'gpt-4o'" in unknown.text
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_folder_of_scripts_and_a_bad_script(tmp_path):
    """`--script FOLDER` loads every file in it; a script that does not validate stops the
    server at start with one line naming the script."""
    (tmp_path / "bad.yaml").write_text("broken:\n  turns: []\n", encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "weft.workers.scripted_model",
        "--script",
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert "script 'broken' is invalid: turns" in err.decode(), err.decode()
