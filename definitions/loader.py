"""Loads a definitions directory: models/, prompts/, agents/, mcp/ (YAML), tools/, hooks/,
effects/ (Python).

One definition per file; the file stem is the name (a hook's id). Every problem is a
DefinitionError that names the file and the field.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import yaml
from pydantic import ValidationError

from weft.contract.definitions import AgentDef, ModelDef, PromptDef
from weft.contract.effects import EFFECT_NAME_PATTERN
from weft.contract.hooks import HOOK_ID_PATTERN
from weft.contract.mcp import MCP_SERVER_NAME_PATTERN, McpServerDef
from weft.contract.validation import describe_validation_error
from weft.definitions.api import FunctionEffect, FunctionHook, FunctionTool
from weft.definitions.definition_set import Definitions
from weft.definitions.errors import DefinitionError
from weft.definitions.mcp_checks import mcp_server_error

# A definition written in YAML, one per file.
YamlDefinition = ModelDef | PromptDef | AgentDef

YAML_KINDS: tuple[tuple[str, type[YamlDefinition]], ...] = (
    ("models", ModelDef),
    ("prompts", PromptDef),
    ("agents", AgentDef),
)


def load_directory(root: str | Path, *, into: Definitions | None = None) -> Definitions:
    """Read every definition under `root` (not validated across files: call `validate`).

    `root` becomes the set's `root` (unless `into` has one already): stdio MCP servers run
    in it, or relative to it, so it is kept absolute.
    """
    root = Path(root)
    if not root.is_dir():
        raise DefinitionError(str(root), None, "definitions directory does not exist")
    definitions = into or Definitions()
    if definitions.root is None:
        definitions.root = root.resolve()
    for folder, model in YAML_KINDS:
        for path in sorted((root / folder).glob("*.y*ml")):
            definitions.add(_load_yaml(path, model, root), source=_rel(path, root))
    for path in sorted((root / "mcp").glob("*.y*ml")):
        definitions.add(_load_mcp_server(path, root), source=_rel(path, root))
    for path in sorted((root / "tools").glob("*.py")):
        if not path.name.startswith("_"):
            definitions.add(_load_tool(path, root), source=_rel(path, root))
    for path in sorted((root / "hooks").glob("*.py")):
        if not path.name.startswith("_"):
            definitions.add(_load_hook(path, root), source=_rel(path, root))
    for path in sorted((root / "effects").glob("*.py")):
        if not path.name.startswith("_"):
            definitions.add(_load_effect(path, root), source=_rel(path, root))
    return definitions


def _load_yaml(path: Path, model: type[YamlDefinition], root: Path) -> YamlDefinition:
    where = _rel(path, root)
    data = _read_named_mapping(path, where)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise DefinitionError(where, None, describe_validation_error(err)) from None


def _load_mcp_server(path: Path, root: Path) -> McpServerDef:
    where = _rel(path, root)
    # The name is the head of a prompt's `server.tool` entries, so a dot would split it.
    _stem_matches(
        path, where, MCP_SERVER_NAME_PATTERN, "name", "hold no dot (letters, digits, _ and -)"
    )
    data = _read_named_mapping(path, where)
    try:
        return McpServerDef.model_validate(data)
    except ValidationError as err:
        raise mcp_server_error(where, err, data) from None


def _read_named_mapping(path: Path, where: str) -> dict[str, object]:
    """The one mapping a YAML definition file holds, its `name` defaulting to the stem."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise DefinitionError(where, None, f"invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise DefinitionError(where, None, "must hold one mapping (a definition)")
    _named_by_stem(data.setdefault("name", path.stem), path, where, "name")
    return data


def _load_tool(path: Path, root: Path) -> FunctionTool:
    where = _rel(path, root)
    tool = _the_one(_import(path, root, "weft_tools"), FunctionTool, where, "tool", "define_tool")
    _named_by_stem(tool.name, path, where, "name")
    return dataclasses.replace(tool, name=path.stem)


def _load_effect(path: Path, root: Path) -> FunctionEffect:
    where = _rel(path, root)
    _stem_matches(path, where, EFFECT_NAME_PATTERN, "name", f"match {EFFECT_NAME_PATTERN}")
    module = _import_naming_file(path, root, "weft_effects")
    effect = _the_one(module, FunctionEffect, where, "effect", "define_effect")
    _named_by_stem(effect.name, path, where, "name")
    return dataclasses.replace(effect, name=path.stem)


def _load_hook(path: Path, root: Path) -> FunctionHook:
    where = _rel(path, root)
    _stem_matches(path, where, HOOK_ID_PATTERN, "id", f"be snake_case ({HOOK_ID_PATTERN})")
    module = _import_naming_file(path, root, "weft_hooks")
    hook = _the_one(module, FunctionHook, where, "hook", "define_hook")
    _named_by_stem(hook.id, path, where, "id")
    return FunctionHook(id=path.stem, hook=hook.hook, execute=hook.execute)


def _stem_matches(path: Path, where: str, pattern: str, field: str, rule: str) -> None:
    """A file whose stem is the definition's name (or id) must have a valid one."""
    if not re.fullmatch(pattern, path.stem):
        raise DefinitionError(
            where, field, f"the file stem {path.stem!r} is the {field} and must {rule}"
        )


def _import_naming_file(path: Path, root: Path, package: str) -> ModuleType:
    """`_import`, with errors of define_hook()/define_effect() (which name the definition,
    not the file) said of the file."""
    where = _rel(path, root)
    try:
        return _import(path, root, package)
    except DefinitionError as err:
        if err.source == where:
            raise
        raise DefinitionError(where, err.field, err.detail) from None


Defined = TypeVar("Defined", FunctionTool, FunctionHook, FunctionEffect)


def _the_one(module: ModuleType, kind: type[Defined], where: str, what: str, how: str) -> Defined:
    """The one `kind` a definition file defines; any other count names the file."""
    found = [v for v in vars(module).values() if isinstance(v, kind)]
    if len(found) != 1:
        raise DefinitionError(
            where, None, f"must define exactly one {what} with {how}(), found {len(found)}"
        )
    return found[0]


def _named_by_stem(name: object, path: Path, where: str, field: str) -> None:
    """A name given in the file must be its stem: the stem is what definitions refer to."""
    if name and name != path.stem:
        raise DefinitionError(
            where,
            field,
            f"{name!r} differs from the file stem {path.stem!r}; the file stem is the {field}",
        )


def _import(path: Path, root: Path, package: str) -> ModuleType:
    """Import one definition file as its own module; failures name the file."""
    where = _rel(path, root)
    module_name = f"{package}.{root.name}.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DefinitionError(where, None, "cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except DefinitionError:
        raise
    except Exception as err:
        raise DefinitionError(
            where, None, f"failed to import: {type(err).__name__}: {err}"
        ) from None
    return module


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
