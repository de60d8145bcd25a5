"""`weft thread export` and `weft thread import` as real subprocesses: a bundle written from
one store is read back from another, and refusals are one line with exit code 1."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import yaml
from bundle_support import SECRET, closed_thread
from support import weft_cli


def _config(path: Path, address: str, store_url: str, namespace: str = "default") -> Path:
    temporal = {"address": address, "namespace": namespace}
    path.write_text(yaml.safe_dump({"temporal": temporal, "store": {"url": store_url}}))
    return path


async def test_export_then_import_through_the_cli(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`export -o` writes a bundle without the secret; `import --as` into another store makes
    a closed thread `show` reads; a taken id and a newer bundle are one `weft:` line each."""
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    address = weft_config.temporal.address
    source = _config(tmp_path / "source.yml", address, weft_config.store_url())
    target = _config(
        tmp_path / "target.yml", address, f"sqlite:///{tmp_path / 'target.db'}", "elsewhere"
    )
    bundle = tmp_path / "out.weftbundle"
    code, out, err = await weft_cli(source, "thread", "export", thread_id, "-o", str(bundle))
    assert code == 0, err
    assert out.startswith(f"{bundle}  sha256:")
    assert SECRET.encode() not in bundle.read_bytes()

    code, out, err = await weft_cli(target, "thread", "import", str(bundle), "--as", "imported-1")
    assert code == 0, err
    assert out.startswith("imported-1  (closed; from default/")
    code, out, err = await weft_cli(target, "thread", "show", "imported-1")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["threadId"] == "imported-1" and shown["status"] == "cancelled"

    code, out, err = await weft_cli(target, "thread", "import", str(bundle), "--as", "imported-1")
    assert (code, out) == (1, "")
    assert err.strip() == "weft: thread 'imported-1' already exists in this store"

    newer = tmp_path / "newer.weftbundle"
    with zipfile.ZipFile(bundle) as old, zipfile.ZipFile(newer, "w") as new:
        for name in old.namelist():
            data = old.read(name)
            if name == "manifest.json":
                data = json.dumps({**json.loads(data), "version": 2}).encode()
            new.writestr(name, data)
    code, out, err = await weft_cli(target, "thread", "import", str(newer))
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "bundle version 2 is newer than this weft reads (version 1)" in err
