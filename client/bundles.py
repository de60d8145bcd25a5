"""Export a thread to one portable bundle, and import a bundle as a closed thread.

The bundle (docs/export-import.md) is a zip: `manifest.json` names the format, its
version and each part's count and sha256; the parts are JSON lines of the thread's stored
rows, its file blobs by digest, its definition snapshots and its Temporal histories. Env
values never enter it: the thread row keeps env names and types, definitions the same,
histories are scrubbed (client/bundle_history.py), and every part is redacted of the
thread's secret values before it is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from temporalio.client import Client

from weft.activities.crypto import CryptoKeyError
from weft.client.bundle_history import (
    env_names,
    env_secrets,
    fetch_runs,
    redact_value,
    scrub_history,
    snapshot_ids_in,
    spellings,
    without_env_values,
)
from weft.contract.bundles import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    MANIFEST,
    BundleError,
    BundleManifest,
    BundlePart,
    EnvName,
    HistoryRun,
)
from weft.contract.events import Event
from weft.contract.thread_env import secret_values
from weft.store import Store
from weft.store.bundle_rows import (
    OPTIONAL_PARTS,
    THREAD_TABLES,
    ThreadExists,
    import_rows,
    thread_records,
)

__all__ = [
    "BundleError",
    "BundleRef",
    "ThreadExists",
    "bundle_thread_id",
    "export_thread",
    "import_bundle",
]

# Statuses the thread row keeps for a thread that never runs again (outcome_fence.py).
_FINAL = ("completed", "cancelled", "failed")


@dataclass(frozen=True)
class BundleRef:
    """Where a bundle is and what it is: the file's sha256 is its stable ref."""

    thread_id: str
    path: Path
    sha256: str
    manifest: BundleManifest
    history_blobs: dict[str, str] = field(default_factory=dict)  # run id -> blob digest


async def export_thread(
    client: Client, store: Store, thread_id: str, path: str | Path, *, namespace: str
) -> BundleRef:
    """Write `thread_id`'s bundle to `path` and record `evidence.changed` on the thread."""
    runs = await fetch_runs(client, thread_id)
    return await asyncio.to_thread(_export, store, thread_id, Path(path), namespace, runs)


async def import_bundle(
    store: Store, path: str | Path, *, as_id: str | None = None, tenant: str | None = None
) -> BundleRef:
    """Import the bundle at `path` into `store` as a closed thread (same id, or `as_id`)
    of `tenant`; without one, of the tenant the bundle's thread row names."""
    return await asyncio.to_thread(_import, store, Path(path), as_id, tenant)


def bundle_thread_id(path: str | Path) -> str:
    """The id of the thread the bundle at `path` holds (its manifest's); BundleError when
    it is not a bundle."""
    try:
        bundle = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as err:
        raise BundleError(f"{path}: not a weft bundle ({err})") from None
    with bundle:
        return read_manifest(bundle).thread_id


# -- export -----------------------------------------------------------------------------


def _export(
    store: Store, thread_id: str, path: Path, namespace: str, runs: list[tuple[str, Any]]
) -> BundleRef:
    thread = store.threads.get(thread_id)
    if thread is None:
        raise BundleError(f"thread {thread_id!r} is not in this store")
    env = thread.env
    snapshot_ids = {sid for _, history in runs for sid in snapshot_ids_in(history)}
    definitions = _snapshots(store, snapshot_ids)
    # The thread's secrets, and the defaults its definitions declare (typed secret unless
    # they say otherwise), are redacted wherever their text appears.
    secrets = spellings({*secret_values(env), *env_secrets(list(definitions.values()))})
    parts: list[BundlePart] = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        row = thread.model_dump(mode="json")
        row["env"] = {name: {"type": kind} for name, kind in env_names(env)}
        parts.append(_write_lines(bundle, "thread.jsonl", [row], secrets))
        digests: set[str] = set()
        for part in THREAD_TABLES:
            records = thread_records(store, part, thread_id)
            if part in ("files", "file_history"):
                records = _noting_blobs(records, digests)
            if part == "effects":
                # A run's outcome is sealed at rest and may carry env: left out.
                records = ({**r, "result": None} for r in records)
            parts.append(_write_lines(bundle, f"{part}.jsonl", records, secrets))
        for digest in sorted(digests):
            data = store.files.get_blob(digest)
            if data is None:
                raise BundleError(f"blob {digest} of a file is missing from the store")
            parts.append(_write_bytes(bundle, f"blobs/{digest}", data))
        histories = []
        for number, (run_id, history) in enumerate(runs, start=1):
            scrub_history(history, secrets)
            name = f"history/{number:04d}-{run_id}.json"
            parts.append(_write_bytes(bundle, name, json.dumps(history).encode()))
            histories.append(HistoryRun(run_id=run_id, part=name, events=len(history["events"])))
        for snapshot_id, snapshot in sorted(definitions.items()):
            text = json.dumps(redact_value(without_env_values(snapshot), secrets))
            parts.append(_write_bytes(bundle, f"definitions/{snapshot_id}.json", text.encode()))
        manifest = BundleManifest(
            weft_version=_weft_version(),
            thread_id=thread_id,
            source_namespace=namespace,
            created_at=datetime.now(UTC).isoformat(),
            parts=parts,
            env=[EnvName(name=n, type=t) for n, t in env_names(env)],
            snapshot_ids=sorted(definitions),
            histories=histories,
            history_payloads="as-stored" if runs else "unavailable",
        )
        bundle.writestr(MANIFEST, manifest.model_dump_json(indent=2))
    ref = BundleRef(thread_id, path, _file_sha256(path), manifest)
    store.events.append([_evidence(thread_id, ref, "exported", {})])
    return ref


def _snapshots(store: Store, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The definition snapshots the thread ran with, by id; one sealed with keys this
    process lacks is left out (the manifest lists only those included)."""
    found = {}
    for snapshot_id in sorted(ids):
        try:
            data = store.snapshots.get(snapshot_id)
        except CryptoKeyError:
            continue
        if data is not None:
            found[snapshot_id] = data
    return found


def _noting_blobs(records: Iterable[dict[str, Any]], digests: set[str]) -> Iterator[dict[str, Any]]:
    for record in records:
        if record.get("blob_digest"):
            digests.add(str(record["blob_digest"]))
        yield record


def _write_lines(
    bundle: zipfile.ZipFile, name: str, records: Iterable[dict[str, Any]], secrets: list[str]
) -> BundlePart:
    """Stream records as JSON lines, each redacted, hashing what is written."""
    digest, size, count = hashlib.sha256(), 0, 0
    with bundle.open(name, "w") as member:
        for record in records:
            line = (json.dumps(redact_value(record, secrets), sort_keys=True) + "\n").encode()
            member.write(line)
            digest.update(line)
            size += len(line)
            count += 1
    return BundlePart(name=name, count=count, sha256=digest.hexdigest(), size=size)


def _write_bytes(bundle: zipfile.ZipFile, name: str, data: bytes) -> BundlePart:
    bundle.writestr(name, data)
    return BundlePart(name=name, count=1, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


# -- import -----------------------------------------------------------------------------


def _import(store: Store, path: Path, as_id: str | None, tenant: str | None) -> BundleRef:
    try:
        bundle = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as err:
        raise BundleError(f"{path}: not a weft bundle ({err})") from None
    with bundle:
        manifest = read_manifest(bundle)
        # Every part is checked before anything is written; then read again as a stream.
        for part in manifest.parts:
            _verify(bundle, part)
        thread_id = as_id or manifest.thread_id
        thread = next(_records(bundle, _part(manifest, "thread.jsonl")))
        thread.update(_closed(thread), thread_id=thread_id)
        if tenant is not None:
            thread["tenant"] = tenant
        thread["env"] = {e.name: {"value": None, "type": e.type} for e in manifest.env}
        parts = {
            part: _renamed(
                part,
                _records(bundle, _part(manifest, f"{part}.jsonl")),
                manifest.thread_id,
                thread_id,
            )
            for part in THREAD_TABLES
            if part not in OPTIONAL_PARTS or manifest.part(f"{part}.jsonl") is not None
        }
        histories = {run.run_id: _part(manifest, run.part) for run in manifest.histories}
        stored = [p for p in manifest.parts if p.name.startswith("blobs/")]
        # Files' blobs and the histories, one at a time: content-addressed by their sha256.
        blobs = ((p.sha256, bundle.read(p.name)) for p in [*stored, *histories.values()])
        snapshots = {}
        for snapshot_id in manifest.snapshot_ids:
            part = _part(manifest, f"definitions/{snapshot_id}.json")
            snapshots[f"imported:{part.sha256}"] = json.loads(bundle.read(part.name))
        import_rows(store, thread, parts, blobs, snapshots)
    history_blobs = {run_id: part.sha256 for run_id, part in histories.items()}
    ref = BundleRef(thread_id, path, _file_sha256(path), manifest, history_blobs)
    extra = {
        "sourceThreadId": manifest.thread_id,
        "sourceNamespace": manifest.source_namespace,
        "histories": [{"runId": r, "blobDigest": d} for r, d in history_blobs.items()],
        "definitions": sorted(snapshots),
    }
    store.events.append([_evidence(thread_id, ref, "imported", extra)])
    return ref


def read_manifest(bundle: zipfile.ZipFile) -> BundleManifest:
    """The bundle's manifest; a newer version or another format is refused, naming both."""
    try:
        raw = json.loads(bundle.read(MANIFEST))
    except KeyError:
        raise BundleError(f"part {MANIFEST} is missing: not a weft bundle") from None
    except ValueError as err:
        raise BundleError(f"part {MANIFEST} is not JSON: {err}") from None
    if not isinstance(raw, dict) or raw.get("format") != BUNDLE_FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise BundleError(f"{MANIFEST}: format {found!r} is not {BUNDLE_FORMAT!r}")
    found_version = raw.get("version")
    if not isinstance(found_version, int) or found_version > BUNDLE_VERSION:
        raise BundleError(
            f"{MANIFEST}: bundle version {found_version!r} is newer than this weft reads "
            f"(version {BUNDLE_VERSION}); upgrade weft to import it"
        )
    try:
        return BundleManifest.model_validate(raw)
    except ValueError as err:
        raise BundleError(f"{MANIFEST}: {err}") from None


def _part(manifest: BundleManifest, name: str) -> BundlePart:
    found = manifest.part(name)
    if found is None:
        raise BundleError(f"part {name} is not listed in the manifest")
    return found


def _verify(bundle: zipfile.ZipFile, part: BundlePart) -> None:
    """Check a part's bytes against the manifest (and a blob's against its name), streamed."""
    digest = hashlib.sha256()
    try:
        with bundle.open(part.name) as member:
            for chunk in iter(lambda: member.read(1 << 20), b""):
                digest.update(chunk)
    except KeyError:
        raise BundleError(f"part {part.name} is missing from the bundle") from None
    except zipfile.BadZipFile as err:
        raise BundleError(f"part {part.name} is corrupt: {err}") from None
    if digest.hexdigest() != part.sha256:
        raise BundleError(f"part {part.name} is corrupt: its sha256 does not match the manifest")
    if part.name.startswith("blobs/") and part.name != f"blobs/{part.sha256}":
        raise BundleError(f"part {part.name}: its bytes do not match its name")


def _records(bundle: zipfile.ZipFile, part: BundlePart) -> Iterator[dict[str, Any]]:
    """A verified part's JSON lines, one at a time; a count other than the manifest's is
    refused (raised while importing, so the import's transaction rolls back)."""
    count = 0
    with bundle.open(part.name) as member:
        for line in io.TextIOWrapper(member, encoding="utf-8"):
            if line.strip():
                count += 1
                yield json.loads(line)
    if count != part.count:
        raise BundleError(f"part {part.name}: {count} records, the manifest says {part.count}")


def _closed(thread: dict[str, Any]) -> dict[str, Any]:
    """An imported thread never runs here: a status that was not final becomes cancelled."""
    status = thread.get("status")
    return {} if status in _FINAL else {"status": "cancelled", "queue_depth": 0}


def _renamed(
    part: str, records: Iterator[dict[str, Any]], source: str, thread_id: str
) -> Iterator[dict[str, Any]]:
    """`records` belonging to `thread_id`: their thread column, an event's envelope, and the
    stored read models of its payload (`threadRead`, the inventory, the environment); other
    payload text keeps the source id, as history."""
    column = THREAD_TABLES[part][1]
    for record in records:
        record[column] = thread_id
        if part == "message_history" and isinstance(record.get("message"), dict):
            record["message"]["thread_id"] = thread_id
        if part == "events" and isinstance(record.get("data"), dict):
            record["data"]["threadId"] = thread_id
            payload = record["data"].get("payload")
            for value in payload.values() if isinstance(payload, dict) else ():
                if isinstance(value, dict) and value.get("threadId") == source:
                    value["threadId"] = thread_id
        yield record


# -- shared -----------------------------------------------------------------------------


def _evidence(thread_id: str, ref: BundleRef, action: str, extra: dict[str, Any]) -> Event:
    """The `evidence.changed` fact of one export or import (seed 001: replay refs)."""
    return Event.model_validate(
        {
            "type": "evidence.changed",
            "eventId": f"evidence-{action}-{ref.sha256[:24]}",
            "evidenceId": f"bundle:{ref.sha256}",
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "threadId": thread_id,
            "status": action,
            "payload": {
                "kind": "replay",
                "action": action,
                "ref": {
                    "format": BUNDLE_FORMAT,
                    "version": ref.manifest.version,
                    "sha256": ref.sha256,
                    "path": str(ref.path),
                },
                **extra,
            },
        }
    )


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _weft_version() -> str:
    try:
        return version("weft")
    except PackageNotFoundError:
        return "unknown"
