"""A newcomer's first hour, as README.md tells it: in a fresh folder outside the checkout,
the quick start's `weft` commands one by one against `weft dev`, then the README's Python
program beside it, each step's output checked. The commands are read from README.md."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from weft.workers.dev_server import free_port, is_listening

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ANSWER = "Sunny in Oslo, says the weather tool."


def readme_section(title: str) -> str:
    """The text of README.md's section `title` (any level), up to the next heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", readme, re.DOTALL | re.MULTILINE)
    assert match is not None, f"README.md has no section {title!r}"
    return match.group(1)


def quick_start() -> list[str]:
    """The commands of the "From any folder" block, comments dropped."""
    block = re.search(r"```sh\n(.*?)```", readme_section("From any folder"), re.DOTALL)
    assert block is not None, "the section has no ```sh block"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


class Newcomer:
    """A user's shell in a fresh folder: `weft` on PATH, no weft settings of ours."""

    def __init__(self, home: Path) -> None:
        self.home = home
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "OPENAI_"))}
        self.env = {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.values: dict[str, str] = {}

    async def run(self, line: str, timeout: float = 60) -> str:
        """Run one command line (THREAD and ACTION filled in); its stdout, exit 0 checked."""
        args = [self.values.get(word, word) for word in shlex.split(line)]
        process = await asyncio.create_subprocess_exec(
            *args,
            cwd=self.home,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        assert process.returncode == 0, f"{line}: exit {process.returncode}: {err.decode()}"
        return out.decode()

    async def until(
        self, line: str, fact: Callable[[str], object], what: str, timeout: float = 30
    ) -> str:
        """Run `line` again until its output shows `fact`, as a user would (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            out = await self.run(line)
            if fact(out):
                return out
            assert loop.time() < deadline, f"{line}: {what} within {timeout:.0f} s; last: {out}"
            await asyncio.sleep(0.2)


async def start_dev(user: Newcomer, line: str) -> tuple[asyncio.subprocess.Process, str]:
    """`weft dev &`: in the background, until its worker runs; returns it and its output."""
    assert line.endswith("&"), line
    process = await asyncio.create_subprocess_exec(
        *shlex.split(line.removesuffix("&")),
        cwd=user.home,
        env=user.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    said = ""
    while "worker running" not in said:
        line_out = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line_out, f"weft dev ended: {said}"
        said += line_out
    return process, said


async def stop_dev(process: asyncio.subprocess.Process, address: str, ui: str) -> None:
    """`kill %1`: SIGTERM, then weft dev and the server it started are gone, ports free."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.read(), 60)
    assert await asyncio.wait_for(process.wait(), 60) == 0
    assert not is_listening(address) and not is_listening(ui), "a port outlived weft dev"


def check(command: str, out: str, user: Newcomer) -> None:
    """What each quick-start command must have printed (and the ids it gives the next)."""
    words = command.split()
    if words[:3] == ["weft", "thread", "start"]:
        user.values["THREAD"] = out.strip()
        assert re.fullmatch(r"travel_assistant-\w+", user.values["THREAD"]), out
    elif words[:3] == ["weft", "thread", "ask"]:
        assert out.strip() == "Paris: light rain, 14 °C. Tokyo: clear, 22 °C.", out
    elif words[:3] == ["weft", "thread", "send"]:
        assert "queued" in out, out
    elif words[:3] == ["weft", "thread", "respond"]:
        assert out.startswith("approved"), out


async def run_quick_start(user: Newcomer, commands: list[str], dev_line: str) -> None:
    """Every command after `weft dev &` but the final `kill`, output checked."""
    for command in commands:
        if command == dev_line or command.startswith("kill "):
            continue
        words = command.split()
        if words[:2] == ["weft", "inbox"]:
            # Visibility is eventually consistent: the user runs it again until it lists.
            out = await user.until(command, lambda o: user.values["THREAD"] in o, "no entry")
            [line] = [row for row in out.splitlines() if user.values["THREAD"] in row]
            assert "tool_permission" in line and "notes_add_note" in line, line
            user.values["ACTION"] = next(w for w in line.split() if w.startswith("act_"))
        elif words[:3] == ["weft", "thread", "show"]:
            out = await user.until(
                command,
                lambda o: (
                    json.loads(o)["status"] == "waiting_input"
                    and not json.loads(o)["pendingActions"]
                    and json.loads(o)["lastOutcome"] is not None
                ),
                "the thread did not finish its turn",
            )
            assert json.loads(out)["lastOutcome"] == "I saved that list in your trip notes."
        else:
            check(command, await user.run(command), user)


async def run_readme_program(user: Newcomer, address: str) -> None:
    """The README's Python program beside `weft dev`, offline: its model is a script of the
    scripted model server, started as docs/scripted-model.md shows."""
    section = readme_section("Embedding weft in Python")
    program = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert program is not None, "the README's Python section has no ```python block"
    (user.home / "program.py").write_text(program.group(1), encoding="utf-8")
    script = {
        "replies": [
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            {"text": ANSWER, "expect": {"has_tool_result_for": "weather"}},
        ]
    }
    (user.home / "scripts.yaml").write_text(yaml.safe_dump({"gpt-4.1-mini": script}))
    model = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "weft.workers.scripted_model", "--script", "scripts.yaml"],
        cwd=user.home,
        stdout=asyncio.subprocess.PIPE,
    )
    assert model.stdout is not None
    try:
        banner = (await asyncio.wait_for(model.stdout.readline(), 30)).decode()
        env = {**user.env, "WEFT_TEMPORAL_ADDRESS": address, "OPENAI_BASE_URL": banner.split()[-1]}
        program_run = await asyncio.create_subprocess_exec(
            sys.executable,
            "program.py",
            cwd=user.home,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(program_run.communicate(), 60)
    finally:
        model.terminate()
        await asyncio.wait_for(model.wait(), 30)
    assert program_run.returncode == 0, err.decode()
    assert out.decode().strip() == ANSWER, (out.decode(), err.decode())


async def test_a_newcomer_follows_the_readme(tmp_path):
    """The quick start's commands, in order, from a folder outside the checkout, and the
    README's Python program beside `weft dev`: every step prints what the README says."""
    user = Newcomer(tmp_path)
    # The one thing a newcomer would not do: move the dev server off 7233/8233, which may
    # be in use on this machine. Nothing else is configured.
    address, ui = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    (tmp_path / "temporal-dev.yml").write_text(
        yaml.safe_dump(
            {"temporal": {"address": address, "devServer": {"uiPort": int(ui.rpartition(":")[2])}}}
        )
    )
    commands = quick_start()
    dev_line = commands[0]
    assert dev_line.startswith("weft dev") and commands[-1].startswith("kill "), commands
    dev, said = await start_dev(user, dev_line)
    try:
        assert f"Temporal at {address} (started here)" in said, said
        await run_quick_start(user, commands, dev_line)
        await run_readme_program(user, address)
    finally:
        await stop_dev(dev, address, ui)
    assert (tmp_path / ".weft" / "weft.db").exists(), "the store belongs in the user's folder"
