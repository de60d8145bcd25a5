"""A clear error when a module of the user's shadows one of weft's top-level packages.

weft still installs `client`, `workers`, `activities`, `workflows`, `contract`, `transport`
and `cli` as top-level packages (ARCHITECTURE.md, "Packaging"). A user's own `client.py`
found first on `sys.path` would otherwise fail `import weft` with an unrelated-looking
"No module named 'client.threads'".
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

INTERNAL_PACKAGES = ("contract", "workflows", "activities", "transport", "workers", "client", "cli")


def shadowed_packages(root: Path) -> dict[str, str]:
    """Each internal package that resolves outside `root` (where weft is installed), with
    where it resolves."""
    found: dict[str, str] = {}
    for name in INTERNAL_PACKAGES:
        module = sys.modules.get(name)
        spec = module.__spec__ if module is not None else importlib.util.find_spec(name)
        if spec is None:
            continue  # not importable at all: the import that needs it says so
        locations = list(spec.submodule_search_locations or [])
        origin = spec.origin
        paths = [Path(p) for p in locations] or ([Path(origin)] if origin else [])
        if paths and not any(_is_under(path, root) for path in paths):
            found[name] = str(paths[0])
    return found


def check_layout() -> None:
    """Raise ImportError naming every shadowing module and what to do about it."""
    root = Path(__file__).resolve().parent.parent
    shadowed = shadowed_packages(root)
    if shadowed:
        listed = ", ".join(f"{name!r} ({where})" for name, where in sorted(shadowed.items()))
        raise ImportError(
            f"weft cannot load its internal packages: {listed} shadow the ones installed "
            f"in {root}. weft still installs {', '.join(INTERNAL_PACKAGES)} as top-level "
            "packages: rename your modules (or move them into a package of your own, e.g. "
            "myapp/client.py imported as myapp.client)"
        )


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True
