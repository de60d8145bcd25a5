"""weft's import structure: client/, workers/ and transport/ import one way (only cli/
composes them all), every import names the weft package, and no modules import in a circle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Package -> the top-level packages it must not import (tests/ and bench/ may import anything).
FORBIDDEN = {
    "client": {"workers", "cli"},
    "workers": {"client", "cli"},
    "transport": {"client", "workers", "cli"},
    # The HTTP API (all of it: the gateway too) composes client/, and is composed by cli/.
    "api": {"cli", "workers"},
}


def _imports(path: Path) -> list[str]:
    """Absolute module names imported anywhere in `path`, lazy imports in functions included."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        # A relative import cannot leave its own top-level package, so it cannot cross over.
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def violations(root: Path) -> list[str]:
    """`file: module` for every import under `root` that goes against FORBIDDEN."""
    found = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            for name in _imports(path):
                if name.removeprefix("weft.").split(".")[0] in banned:
                    found.append(f"{path.relative_to(root).as_posix()}: {name}")
    return found


def test_client_workers_and_transport_import_in_one_direction():
    """client/ and workers/ import neither each other nor cli/, and transport/ imports none."""
    offenders = violations(ROOT)
    assert not offenders, "imports against the direction client/workers -> transport:\n" + (
        "\n".join(offenders)
    )


def test_direction_check_finds_planted_violations(tmp_path):
    """The scan reports forbidden imports, nested and lazy ones too, so it cannot pass vacuously."""
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "bad.py").write_text(
        "from workers.config import WeftConfig\n\ndef f():\n    import cli.main\n"
    )
    (tmp_path / "transport" / "nested").mkdir(parents=True)
    (tmp_path / "transport" / "nested" / "bad.py").write_text(
        "import contract\nfrom . import sibling\nfrom client import threads\n"
    )
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "ok.py").write_text("from transport.connection import connect\n")
    assert violations(tmp_path) == [
        "client/bad.py: workers.config",
        "client/bad.py: cli.main",
        "transport/nested/bad.py: client",
    ]


INTERNAL = {
    "contract",
    "workflows",
    "activities",
    "store",
    "definitions",
    "transport",
    "workers",
    "client",
    "cli",
    "api",
}


def bare_imports(root: Path) -> list[str]:
    """`file: module` for every import of an internal part by its bare name (not weft.X)."""
    found = []
    for folder in (*sorted(INTERNAL), "weft", "tests", "bench"):
        base = root / folder
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.rglob("*.py")):
            for name in _imports(path):
                if name.split(".")[0] in INTERNAL:
                    found.append(f"{path.relative_to(root).as_posix()}: {name}")
    return found


def test_every_import_names_the_weft_package():
    """Code imports `weft.activities…`, never `activities…`: in a checkout the bare names
    still resolve from the root, and a module loaded under both names would exist twice."""
    assert not bare_imports(ROOT)


def test_bare_import_check_finds_planted_ones(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.py").write_text("import weft.client\nfrom activities import x\n")
    assert bare_imports(tmp_path) == ["tests/bad.py: activities"]


# -- import cycles ------------------------------------------------------------------------


def module_files(root: Path) -> dict[str, Path]:
    """Every weft module by its dotted name: the top-level parts as `weft.<part>…`, and
    the real files of weft/ itself (its symlinks are those same parts)."""
    modules = {}
    for folder in sorted(INTERNAL):
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(("weft", *parts))] = path
    for path in sorted((root / "weft").glob("*.py")):
        name = "weft" if path.stem == "__init__" else f"weft.{path.stem}"
        modules[name] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports under `node` that can run, in functions too; the body of an
    `if TYPE_CHECKING:` never runs, so it is skipped (its `else:` is not)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:
                yield from _run_time_imports_of(branch)
            continue
        yield from _run_time_imports_of(child)


def _run_time_imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _run_time_imports(node)


def _imported_modules(
    node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path]
) -> set[str]:
    """The weft modules one import statement loads: `from x import y` is module `x.y` when
    that is a module (Python then needs nothing else of `x`'s own code), else `x`."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules.keys()
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    subs = {f"{base}.{alias.name}" for alias in node.names}
    found = subs & modules.keys()
    if len(found) < len(subs) and base in modules:
        found.add(base)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the weft modules it imports when it runs (lazy imports in functions too)."""
    modules = module_files(root)
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            target
            for node in _run_time_imports(tree)
            for target in _imported_modules(node, package, modules)
            if target != name
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import one another in a circle (a strongly connected
    component of two or more), sorted; Tarjan's algorithm, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_modules_import_in_a_circle():
    """No weft modules import one another in a circle: a circle makes a module's names
    depend on which of them was imported first, and hides which one is the lower layer."""
    found = cycles(import_graph(ROOT))
    assert not found, "modules importing in a circle:\n" + "\n".join(map(str, found))


def test_cycle_check_finds_planted_circles(tmp_path):
    """A circle through a lazy import, a relative one and `from package import module` is
    found; one closed only under `if TYPE_CHECKING:` is not, since that import never runs."""
    (tmp_path / "weft").mkdir()
    (tmp_path / "weft" / "__init__.py").write_text("")
    store = tmp_path / "store"
    store.mkdir()
    (store / "__init__.py").write_text("from weft.store.a import A\n")
    (store / "a.py").write_text("def f():\n    from . import b\n")
    (store / "b.py").write_text("from weft.store import a\n")
    client = tmp_path / "client"
    client.mkdir()
    (client / "__init__.py").write_text("")
    (client / "x.py").write_text("import weft.client.y\n")
    (client / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from weft.client import x\n"
        "else:\n    import weft.client.z\n"
    )
    (client / "z.py").write_text("from weft.client.x import NAME\n")
    (client / "alone.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import weft.client.alone2\n"
    )
    (client / "alone2.py").write_text("import weft.client.alone\n")
    assert cycles(import_graph(tmp_path)) == [
        ["weft.client.x", "weft.client.y", "weft.client.z"],
        ["weft.store.a", "weft.store.b"],
    ]


# The public API (weft/) composes the parts, so only cli/ (and tests, bench) may import it.
PUBLIC_API_USERS = {"cli"}


def public_api_imports(root: Path) -> list[str]:
    """`module: imported` for every import of weft/'s own modules (`import weft`, `weft._…`,
    `weft.evals`) by a part of weft other than cli/."""
    graph = import_graph(root)
    public = {name for name, path in module_files(root).items() if path.parent.name == "weft"}
    return [
        f"{name}: {target}"
        for name in sorted(graph)
        if name not in public and name.split(".")[1] not in PUBLIC_API_USERS
        for target in sorted(graph[name] & public)
    ]


def test_only_cli_imports_the_public_api():
    """No part of weft imports the `weft` package root or its own modules: a part that did
    would depend on the composition root above it (the sandbox pool once imported it to
    find the checkout through `weft.__file__`)."""
    assert not public_api_imports(ROOT)


def test_public_api_check_finds_planted_imports(tmp_path):
    """An activity importing `weft` itself is reported; cli/ importing `weft.evals` is not."""
    (tmp_path / "weft").mkdir()
    (tmp_path / "weft" / "__init__.py").write_text("")
    (tmp_path / "weft" / "evals.py").write_text("")
    (tmp_path / "activities").mkdir()
    (tmp_path / "activities" / "pool.py").write_text("def root():\n    import weft\n")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "main.py").write_text("from weft import evals\n")
    assert public_api_imports(tmp_path) == ["weft.activities.pool: weft"]
