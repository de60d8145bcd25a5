"""The README's "Embedding weft in Python" program, run verbatim in a subprocess against a
plain dev server (no search attributes registered) and the scripted model server."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from weft.workers.config import DevServerConfig, load_config
from weft.workers.dev_server import DevServer, free_port
from weft.workers.dev_stack import DevStack
from weft.workers.scripted_model import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[1]
ANSWER = "Sunny in Oslo, says the weather tool."


def readme_program() -> str:
    """The first python block of the README section "Embedding weft in Python"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Embedding weft in Python\n", 1)
    assert len(section) == 2, "README.md has no section 'Embedding weft in Python'"
    block = re.search(r"```python\n(.*?)```", section[1], re.DOTALL)
    assert block is not None, "the section has no ```python block"
    return block.group(1)


def test_the_program_is_short():
    """The program stays a complete program of about 15 lines of code."""
    code = [line for line in readme_program().splitlines() if line.strip()]
    assert len(code) <= 20, f"{len(code)} lines"
    assert "weft.Worker(" in readme_program() and ".ask(" in readme_program()


SCRIPT = {
    "replies": [
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
        # The answer is played only if the weather tool's result is in the request.
        {"text": ANSWER, "expect": {"has_tool_result_for": "weather"}},
    ]
}


def _dev_server() -> DevServer:
    config = DevServerConfig(
        ui_port=free_port(),
        db_file=None,
        dynamic_config={"history.transferProcessorMaxPollRPS": 10000},
    )
    return DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=False)


async def _run_program(
    folder: Path, address: str, scripted: ScriptedModelServer
) -> tuple[int | None, str, str]:
    """Run the README's program in `folder` against `address`: exit code, stdout, stderr."""
    program = folder / "program.py"
    program.write_text(readme_program(), encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_", "WEFT_"))
    }
    env.update(
        WEFT_TEMPORAL_ADDRESS=address,
        OPENAI_BASE_URL=scripted.openai_base_url,
        PYTHONUNBUFFERED="1",
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(program),
        cwd=folder,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode, out.decode(), err.decode()


async def test_readme_program_prints_the_answer(tmp_path):
    """The program defines a tool, starts a worker, asks, and prints the model's answer,
    which the scripted model gives only after the tool's result reached it."""
    dev = _dev_server()
    await dev.start()
    try:
        # The README's model is gpt-4.1-mini: the scripted server answers it by name.
        async with ScriptedModelServer({"gpt-4.1-mini": SCRIPT}) as scripted:
            code, out, err = await _run_program(tmp_path, dev.address, scripted)
            requests = scripted.requests
    finally:
        await dev.stop()
    assert code == 0, err
    assert out.strip() == ANSWER
    tool_results = [
        message
        for request in requests
        for message in request["messages"] or []
        if message.get("role") == "tool"
    ]
    assert any("Sunny in Oslo" in str(message.get("content")) for message in tool_results)
    assert (tmp_path / "weft.db").exists()  # the default store, in the current directory


async def test_readme_program_beside_weft_dev(tmp_path):
    """The program prints its answer while `weft dev`'s stack (temporal-dev.yml, the demo
    definitions) runs a worker on the same Temporal server: their threads never mix."""
    dev = _dev_server()
    await dev.start()
    stack_dir, program_dir = tmp_path / "dev", tmp_path / "program"
    stack_dir.mkdir()
    program_dir.mkdir()
    # temporal-dev.yml as `weft dev` reads it; its own files (store, keys) under stack_dir.
    config = load_config(
        ROOT / "temporal-dev.yml",
        environ={
            "WEFT_TEMPORAL_ADDRESS": dev.address,
            "WEFT_STORE_URL": f"sqlite:///{stack_dir / 'weft.db'}",
        },
    )
    config.definitions = str(config.path(config.definitions))
    for provider in config.providers.values():
        if provider.scripts is not None:
            provider.scripts = str(config.path(provider.scripts))
    config.root = stack_dir
    try:
        async with (
            DevStack(config, ui=False),
            ScriptedModelServer({"gpt-4.1-mini": SCRIPT}) as scripted,
        ):
            code, out, err = await _run_program(program_dir, dev.address, scripted)
    finally:
        await dev.stop()
    assert code == 0, err
    assert out.strip() == ANSWER
