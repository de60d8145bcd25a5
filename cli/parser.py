"""The argument parser of every `weft` command: a usage error is one line, exit code 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_USAGE = 2


class CommandParser(argparse.ArgumentParser):
    """argparse, but a bad flag or value is one `weft:` line naming it, not the usage block
    (subcommands inherit the class: argparse builds them with the parent's type)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("weft").strip()
        where = f"{command}: " if command else ""
        print(f"weft: {where}{message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


__all__ = ["EXIT_USAGE", "CommandParser"]
