"""Thread filesystems in the store: files, directories, search and copies between threads."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from store_factories import new_thread_id

from weft.store import Store, StoreLimitError
from weft.store.file_paths import MAX_PATH_CHARS, InvalidPathError, normalize_path
from weft.store.files import MAX_FILE_BYTES, DirectoryNotEmptyError
from weft.store.tables import blobs, files


def blob_count(store: Store) -> int:
    """How many blob rows the store holds."""
    with store.engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(blobs)) or 0)


def test_binary_and_text_round_trip(store: Store) -> None:
    """Every byte value and a UTF-8 string read back exactly, with size, digest and type."""
    thread = new_thread_id()
    data = bytes(range(256)) * 40 + os.urandom(1000)
    stat = store.files.write_file(thread, "/attachments/blob.bin", data)
    assert store.files.read_file(thread, "/attachments/blob.bin") == data
    assert stat.size == len(data) and stat.digest == hashlib.sha256(data).hexdigest()
    store.files.write_file(thread, "notes/today.md", "snow \u2603 and NUL \x00")
    assert store.files.read_file(thread, "/notes/today.md").decode() == "snow \u2603 and NUL \x00"
    note = store.files.stat_file(thread, "/notes/today.md")
    assert note is not None and note.kind == "file" and note.mime_type == "text/markdown"
    assert store.files.get_blob(note.digest or "") == "snow \u2603 and NUL \x00".encode()


def test_overwrite_replaces_content_and_keeps_created_at(store: Store) -> None:
    """Writing a path again replaces its bytes and type; created_at stays."""
    thread = new_thread_id()
    first = store.files.write_file(thread, "/a.txt", b"one")
    second = store.files.write_file(thread, "/a.txt", b"two!", mime_type="text/x-test")
    assert store.files.read_file(thread, "/a.txt") == b"two!"
    assert second.created_at == first.created_at and second.size == 4
    assert second.mime_type == "text/x-test"


def test_same_bytes_are_one_blob(store: Store) -> None:
    """Equal content written twice, or put as a blob, is stored once."""
    thread = new_thread_id()
    before = blob_count(store)
    digest = store.files.put_blob(b"shared bytes")
    assert store.files.put_blob(b"shared bytes") == digest
    store.files.write_file(thread, "/x", b"shared bytes")
    store.files.write_file(thread, "/y", b"shared bytes")
    assert blob_count(store) == before + 1
    assert store.files.get_blob("0" * 64) is None


def test_parents_are_created_and_listed(store: Store) -> None:
    """Writing a deep file creates its parent directories; readdir lists direct children."""
    thread = new_thread_id()
    store.files.write_file(thread, "/a/b/c.txt", b"c")
    store.files.write_file(thread, "/a/z.txt", b"z")
    store.files.mkdir(thread, "/a/empty")
    b = store.files.stat_file(thread, "/a/b")
    assert b is not None and b.kind == "dir"
    listing = store.files.readdir(thread, "/a")
    assert [(e.name, e.kind) for e in listing] == [
        ("b", "dir"),
        ("empty", "dir"),
        ("z.txt", "file"),
    ]
    assert [e.path for e in store.files.readdir(thread, "/")] == ["/a"]
    assert store.files.readdir(thread, "/a/empty") == []


def test_mkdir_rules(store: Store) -> None:
    """mkdir needs an existing parent unless `parents`; an existing path is an error then."""
    thread = new_thread_id()
    with pytest.raises(FileNotFoundError, match="/missing"):
        store.files.mkdir(thread, "/missing/child")
    store.files.mkdir(thread, "/missing/child", parents=True)
    store.files.mkdir(thread, "/missing/child", parents=True)
    with pytest.raises(FileExistsError, match="/missing/child"):
        store.files.mkdir(thread, "/missing/child")
    store.files.write_file(thread, "/f", b"")
    with pytest.raises(FileExistsError):
        store.files.mkdir(thread, "/f", parents=True)
    with pytest.raises(NotADirectoryError, match="/f"):
        store.files.write_file(thread, "/f/inner", b"x")
    with pytest.raises(IsADirectoryError, match="/missing"):
        store.files.write_file(thread, "/missing", b"x")


def test_unlink_and_rmdir(store: Store) -> None:
    """unlink removes files only; rmdir refuses a non-empty directory unless recursive."""
    thread = new_thread_id()
    store.files.write_file(thread, "/d/one.txt", b"1")
    store.files.write_file(thread, "/d/sub/two.txt", b"2")
    store.files.write_file(thread, "/dx/keep.txt", b"k")
    with pytest.raises(IsADirectoryError):
        store.files.unlink(thread, "/d")
    store.files.unlink(thread, "/d/one.txt")
    assert store.files.stat_file(thread, "/d/one.txt") is None
    with pytest.raises(FileNotFoundError, match=f"{thread}.*/d/one.txt"):
        store.files.unlink(thread, "/d/one.txt")
    with pytest.raises(DirectoryNotEmptyError, match="/d "):
        store.files.rmdir(thread, "/d")
    with pytest.raises(NotADirectoryError):
        store.files.rmdir(thread, "/dx/keep.txt")
    store.files.rmdir(thread, "/d", recursive=True)
    assert store.files.find(thread, "**") == ["/dx", "/dx/keep.txt"]
    store.files.unlink(thread, "/dx/keep.txt")
    store.files.rmdir(thread, "/dx")
    assert store.files.readdir(thread, "/") == []
    with pytest.raises(FileNotFoundError, match="/dx"):
        store.files.readdir(thread, "/dx")


def test_prefix_match_is_exact(store: Store) -> None:
    """Removing /a/ leaves /A/ and /a_b alone (SQLite LIKE would be case- and _-blind)."""
    thread = new_thread_id()
    for path in ("/a/x", "/A/x", "/a_b/x", "/ab"):
        store.files.write_file(thread, path, b".")
    store.files.rmdir(thread, "/a", recursive=True)
    assert store.files.find(thread, "x") == ["/A/x", "/a_b/x"]
    assert [e.name for e in store.files.readdir(thread, "/")] == ["A", "a_b", "ab"]


def test_missing_and_directory_reads_fail_by_name(store: Store) -> None:
    """Reading a missing path or a directory raises an error naming thread and path."""
    thread = new_thread_id()
    store.files.mkdir(thread, "/dir")
    with pytest.raises(FileNotFoundError, match=f"{thread}.*/nope.txt"):
        store.files.read_file(thread, "/nope.txt")
    with pytest.raises(IsADirectoryError, match="/dir"):
        store.files.read_file(thread, "/dir")
    with pytest.raises(IsADirectoryError):
        store.files.read_file(thread, "/")
    assert store.files.stat_file(thread, "/nope.txt") is None


def test_find_globs(store: Store) -> None:
    """Name globs match anywhere; path globs match from the root; ** spans directories."""
    thread = new_thread_id()
    for path in ("/a.png", "/img/b.png", "/img/deep/c.png", "/img/c.jpg", "/doc/readme.md"):
        store.files.write_file(thread, path, b".")
    assert store.files.find(thread, "*.png") == ["/a.png", "/img/b.png", "/img/deep/c.png"]
    assert store.files.find(thread, "/img/*.png") == ["/img/b.png"]
    assert store.files.find(thread, "img/**/*.png") == ["/img/b.png", "/img/deep/c.png"]
    assert store.files.find(thread, "/img/**") == [
        "/img/b.png",
        "/img/c.jpg",
        "/img/deep",
        "/img/deep/c.png",
    ]
    assert store.files.find(thread, "?.jpg") == ["/img/c.jpg"]
    assert store.files.find(thread, "[bc].*") == ["/img/b.png", "/img/c.jpg", "/img/deep/c.png"]
    assert store.files.find(thread, "[!bc].*") == ["/a.png"]
    assert store.files.find(thread, "img") == ["/img"]


def test_grep(store: Store) -> None:
    """grep reports matching lines of text files with 1-based numbers, skipping binaries."""
    thread = new_thread_id()
    store.files.write_file(thread, "/notes/a.txt", "alpha\nbeta\ngamma beta\n")
    store.files.write_file(thread, "/notes/b.md", "beta only")
    store.files.write_file(thread, "/bin/raw", b"\xff\xfe beta")
    found = store.files.grep(thread, r"beta")
    assert [(m.path, m.line, m.text) for m in found] == [
        ("/notes/a.txt", 2, "beta"),
        ("/notes/a.txt", 3, "gamma beta"),
        ("/notes/b.md", 1, "beta only"),
    ]
    assert [m.path for m in store.files.grep(thread, "^beta", "*.md")] == ["/notes/b.md"]
    assert len(store.files.grep(thread, "a", max_matches=2)) == 2
    with pytest.raises(ValueError, match="invalid grep pattern"):
        store.files.grep(thread, "(")


@pytest.mark.parametrize(
    "path",
    ["", "   ", "/a/../b", "..", "/a\x00b", "/" + "x" * 256, "/" + "/".join(["d" * 200] * 6)],
    ids=["empty", "blank", "dotdot", "bare-dotdot", "nul", "long-name", "long-path"],
)
def test_bad_paths_are_refused(store: Store, path: str) -> None:
    """Empty paths, `..`, NUL and over-long paths raise InvalidPathError naming the path."""
    thread = new_thread_id()
    with pytest.raises(InvalidPathError, match="invalid file path") as caught:
        store.files.write_file(thread, path, b"x")
    assert caught.value.path == path
    with pytest.raises(InvalidPathError):
        store.files.read_file(thread, path)
    with store.engine.connect() as connection:
        count = connection.scalar(
            select(func.count()).select_from(files).where(files.c.thread_id == thread)
        )
    assert count == 0


def test_paths_are_normalised() -> None:
    """Relative paths start at the root; `.`, repeated and trailing slashes go away."""
    assert normalize_path("a/./b//c/") == "/a/b/c"
    assert normalize_path("/") == "/"
    longest = "/".join(["d" * 200] * 5) + "/" + "x" * 18
    assert len(normalize_path(longest)) == MAX_PATH_CHARS
    with pytest.raises(InvalidPathError, match="longer than 1024"):
        normalize_path(longest + "x")


def test_file_size_cap(sqlite_store: Store) -> None:
    """A file over MAX_FILE_BYTES is refused with an error naming the limit."""
    with pytest.raises(StoreLimitError, match="max_file_bytes") as caught:
        sqlite_store.files.write_file(new_thread_id(), "/big", b"\0" * (MAX_FILE_BYTES + 1))
    assert caught.value.limit == "max_file_bytes"


def test_threads_are_isolated(store: Store) -> None:
    """The same path in two threads holds two files; neither sees or removes the other's."""
    one, two = new_thread_id(), new_thread_id()
    store.files.write_file(one, "/secret.txt", b"one's")
    with pytest.raises(FileNotFoundError, match=two):
        store.files.read_file(two, "/secret.txt")
    assert store.files.find(two, "**") == [] and store.files.readdir(two, "/") == []
    assert store.files.grep(two, "one") == []
    store.files.write_file(two, "/secret.txt", b"two's")
    store.files.unlink(two, "/secret.txt")
    assert store.files.read_file(one, "/secret.txt") == b"one's"


def test_copy_names_and_shares_blobs(store: Store) -> None:
    """Copies land under target_dir by base name, taken names get -1, -2; no bytes copied."""
    parent, child = new_thread_id(), new_thread_id()
    report = os.urandom(5000)
    store.files.write_file(parent, "/out/report.pdf", report)
    store.files.write_file(parent, "/other/report.pdf", b"another report")
    store.files.write_file(parent, "/out/data", b"no extension")
    store.files.write_file(child, "/attachments/report.pdf", b"child's own")
    blobs_before = blob_count(store)

    paths = store.files.copy_files(
        parent,
        child,
        ["/out/report.pdf", "/other/report.pdf", "out/data"],
        copy_id="copy-1",
    )

    assert paths == ["/attachments/report-1.pdf", "/attachments/report-2.pdf", "/attachments/data"]
    assert store.files.read_file(child, paths[0]) == report
    assert store.files.read_file(child, paths[1]) == b"another report"
    assert store.files.read_file(child, "/attachments/report.pdf") == b"child's own"
    assert blob_count(store) == blobs_before
    source, copied = (
        store.files.stat_file(parent, "/out/report.pdf"),
        store.files.stat_file(child, paths[0]),
    )
    assert source is not None and copied is not None
    assert copied.digest == source.digest and copied.mime_type == "application/pdf"
    with store.engine.connect() as connection:
        holders = connection.scalar(
            select(func.count()).select_from(blobs).where(blobs.c.digest == source.digest)
        )
    assert holders == 1


def test_copy_is_idempotent_by_copy_id(store: Store) -> None:
    """A retried copy returns the same paths and writes no second row or event."""
    parent, child = new_thread_id(), new_thread_id()
    store.files.write_file(parent, "/r.txt", b"r")
    first = store.files.copy_files(parent, child, ["/r.txt"], target_dir="/in", copy_id="c1")
    again = store.files.copy_files(parent, child, ["/r.txt"], target_dir="/in", copy_id="c1")
    assert first == again == ["/in/r.txt"]
    assert store.files.find(child, "**") == ["/in", "/in/r.txt"]
    marker = store.events.read(child, types=["artifact.changed"])
    assert len(marker) == 1 and marker[0].payload["paths"] == ["/in/r.txt"]
    assert marker[0].payload["sourceThreadId"] == parent
    second = store.files.copy_files(parent, child, ["/r.txt"], target_dir="/in", copy_id="c2")
    assert second == ["/in/r-1.txt"]


def test_copy_of_missing_file_writes_nothing(store: Store) -> None:
    """A missing source fails naming thread and path, and no file of the batch is copied."""
    parent, child = new_thread_id(), new_thread_id()
    store.files.write_file(parent, "/ok.txt", b"ok")
    with pytest.raises(FileNotFoundError, match=f"{parent}.*/gone.txt"):
        store.files.copy_files(parent, child, ["/ok.txt", "/gone.txt"], copy_id="c")
    assert store.files.find(child, "**") == []
    assert store.events.read(child) == []
    store.files.write_file(parent, "/gone.txt", b"back")
    assert store.files.copy_files(parent, child, ["/ok.txt", "/gone.txt"], copy_id="c") == [
        "/attachments/ok.txt",
        "/attachments/gone.txt",
    ]


def test_copy_into_a_file_path_fails(store: Store) -> None:
    """A target_dir that is a file in the target thread is refused by name."""
    parent, child = new_thread_id(), new_thread_id()
    store.files.write_file(parent, "/r.txt", b"r")
    store.files.write_file(child, "/attachments", b"a file")
    with pytest.raises(NotADirectoryError, match="/attachments"):
        store.files.copy_files(parent, child, ["/r.txt"], copy_id="c")


def test_racing_copies_with_one_copy_id_write_once(store_url: str) -> None:
    """Eight stores racing the same copy (as retried attempts might) agree on the paths,
    and the target holds one copy."""
    parent, child = new_thread_id(), new_thread_id()
    stores = [Store.open(store_url) for _ in range(8)]
    try:
        stores[0].files.write_file(parent, "/r.txt", b"r")

        def copy(store: Store) -> list[str]:
            return store.files.copy_files(parent, child, ["/r.txt"], copy_id="race")

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(copy, stores))
        assert results == [["/attachments/r.txt"]] * 8
        assert stores[0].files.find(child, "*.txt") == ["/attachments/r.txt"]
        assert len(stores[0].events.read(child, types=["artifact.changed"])) == 1
    finally:
        for store in stores:
            store.close()


def test_racing_writes_share_parent_directories(store_url: str) -> None:
    """Concurrent writes into one new directory tree all land, with each directory once."""
    thread = new_thread_id()
    stores = [Store.open(store_url) for _ in range(6)]
    try:

        def write(i: int) -> None:
            stores[i].files.write_file(thread, f"/deep/tree/f{i}.txt", f"file {i}")

        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(write, range(6)))
        assert stores[0].files.find(thread, "**") == [
            "/deep",
            "/deep/tree",
            *[f"/deep/tree/f{i}.txt" for i in range(6)],
        ]
        assert stores[0].files.read_file(thread, "/deep/tree/f3.txt") == b"file 3"
    finally:
        for store in stores:
            store.close()


def test_overlong_copy_id_is_refused(store: Store) -> None:
    """A copy_id too long for an event id fails by name before anything is written."""
    parent, child = new_thread_id(), new_thread_id()
    store.files.write_file(parent, "/r.txt", b"r")
    with pytest.raises(StoreLimitError, match="copy_id"):
        store.files.copy_files(parent, child, ["/r.txt"], copy_id="c" * 300)
    assert store.files.find(child, "**") == []
