"""How an `McpServerDef` is reached for one thread: `${NAME}` filled from the thread's env.

The resolved transport parameters also key the worker's session pool, so two threads
whose env gives a server different secrets never share a session.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mcp.client.stdio import get_default_environment

from weft.activities.mcp.types import McpUnavailable
from weft.contract.mcp import McpServerDef
from weft.contract.thread_env import EnvEntry

# `${NAME}` is the thread's env value NAME; `$${NAME}` is the text `${NAME}` itself.
_PLACEHOLDER = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ResolvedServer:
    """One server's transport with the thread's env filled in (secrets included)."""

    name: str
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    # What a stdio process inherits of the worker's environment (workers/ chooses it: never
    # the whole environment, which holds the providers' keys). Not part of the key.
    base_env: Mapping[str, str] = field(default_factory=dict, compare=False)

    def key(self) -> str:
        """The pool's key: the server's name and a digest of everything that reaches it."""
        spelled = json.dumps(
            [
                self.transport,
                self.command,
                list(self.args),
                sorted(self.env.items()),
                self.cwd,
                self.url,
                sorted(self.headers.items()),
            ]
        )
        return f"{self.name}:{hashlib.sha256(spelled.encode()).hexdigest()[:24]}"

    def process_env(self) -> dict[str, str]:
        """The stdio process's environment: the server's `env` over the inherited base."""
        return {**self.base_env, **self.env}


def resolve(
    server: McpServerDef,
    env: Mapping[str, EnvEntry],
    *,
    root: Path | None,
    base_env: Mapping[str, str] | None = None,
) -> ResolvedServer:
    """`server` for a thread with `env`; a relative (or absent) `cwd` is taken from `root`.

    Raises `McpUnavailable` naming the server, the missing value and where it is used.
    """

    def fill(text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            escaped, name = match.group(1), match.group(2)
            if escaped:
                return "${" + name + "}"
            entry = env.get(name)
            if entry is None or entry.value is None:
                raise McpUnavailable(
                    server.name, f"needs the thread's env value {name!r} (for {where})"
                )
            return str(entry.value)

        return _PLACEHOLDER.sub(one, text)

    if server.url is not None:
        return ResolvedServer(
            name=server.name,
            transport="http",
            url=fill(server.url, "url"),
            headers={k: fill(v, f"headers.{k}") for k, v in server.headers.items()},
        )
    command = server.command or ""
    return ResolvedServer(
        name=server.name,
        transport="stdio",
        # `python` is the worker's own interpreter, so a server shipped with the
        # definitions runs with the packages the worker has.
        command=sys.executable if command == "python" else command,
        args=tuple(fill(arg, f"args[{i}]") for i, arg in enumerate(server.args)),
        env={k: fill(v, f"env.{k}") for k, v in server.env.items()},
        cwd=_working_directory(fill(server.cwd, "cwd") if server.cwd else None, root),
        base_env=dict(base_env) if base_env is not None else get_default_environment(),
    )


def _working_directory(cwd: str | None, root: Path | None) -> str | None:
    """An absolute `cwd`; relative ones (and none) start at `root` (else the worker's)."""
    if cwd is not None and Path(cwd).is_absolute():
        return cwd
    base = root if root is not None else Path.cwd()
    return str((base / cwd) if cwd else base)
