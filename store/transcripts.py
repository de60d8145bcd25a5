"""A thread's main transcript as `model.call` reads it each step, cached per worker.

Every step sends the transcript from the boundary in force on. Reading and validating
all of it again each step made a step's cost grow with the thread (a 400-step thread
re-parsed 800 rows a step). The worker keeps each thread's transcript in memory and reads
only what was appended since, inside one snapshot that also checks the copy is still
true:

- the thread's transcript revision, bumped in the same transaction as any update or
  delete of a stored message (`bump_transcript_revision`), must be the one cached;
- the stored row count from the first cached position must equal the cached rows plus
  the tail just read, which catches an insert anywhere but the end (a stale attempt, or
  a message from a worker that does not bump revisions).

Anything else rereads the transcript whole, so a miss (after eviction, on another
worker, after an edit) costs one full read and is never wrong.

Each message is kept as its JSON text (`MessageJson`), not as a `Message`. A pydantic
message is about seven objects the garbage collector tracks; a worker keeping a thousand
long threads held millions, and each full collection walked them all, a pause that
stalls every activity and heartbeat of the worker (200 threads of 800 messages: 1.9
million tracked objects and 1.2–1.5 s a full collection, against 0.5 million and 0.3 s
kept as texts; docs/performance.md, "Session 17"). A string is not tracked at all. The
step's window is built from the texts (message_views.py keeps each text's wire part, so
a step parses only what is new), and `messages_of` rebuilds `Message`s for the callers
that need them whole.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NewType

from sqlalchemy import JSON, Connection

from weft.contract.messages import Message
from weft.store.database import Database
from weft.store.driver_sql import cursor_rows
from weft.store.messages import TRANSCRIPT_ORDER
from weft.store.rows import row_to_message
from weft.store.tables import messages
from weft.store.thread_cache_budget import DEFAULT_THREADS

# Characters of message JSON all cached transcripts may hold together, about 256 MB.
DEFAULT_CACHED_CHARS = 256 * 1024 * 1024

# A stored message as the cache keeps it: `Message.model_dump_json()` of it. Equal texts
# are equal messages, so a text is also the key its derived views are kept under.
MessageJson = NewType("MessageJson", str)


def message_json(message: Message) -> MessageJson:
    """`message` as the transcript cache keeps it."""
    return MessageJson(message.model_dump_json())


def messages_of(texts: Iterable[MessageJson | Message]) -> list[Message]:
    """`Message`s rebuilt from kept texts (a `Message` among them is taken as it is)."""
    return [t if isinstance(t, Message) else Message.model_validate_json(t) for t in texts]


@dataclass
class _Cached:
    first: int  # the lowest position this copy was read from
    revision: int
    rows: list[MessageJson] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    chars: int = 0

    def extend(self, tail: list[Message]) -> None:
        texts = [message_json(m) for m in tail]
        self.rows.extend(texts)
        self.positions.extend(m.position for m in tail)
        self.chars += sum(len(t) for t in texts)

    def trim(self, first: int) -> None:
        """Drop what lies before `first` (a compaction moved the window on)."""
        cut = bisect.bisect_left(self.positions, first)
        self.chars -= sum(len(t) for t in self.rows[:cut])
        del self.rows[:cut], self.positions[:cut]
        self.first = first


@dataclass
class TranscriptStats:
    """What the cache did, for tests and benchmarks: reads and rows loaded."""

    hits: int = 0
    misses: int = 0
    rows_loaded: int = 0


class Transcripts:
    """Depth-0 messages of a thread from a position on, read through a bounded cache.

    It keeps at most `max_threads` threads' transcripts (a worker's workflow cache's
    worth: store/thread_cache_budget.py), least recently read dropped first, and at most
    `max_chars` characters of them in all."""

    def __init__(
        self,
        database: Database,
        *,
        max_threads: int = DEFAULT_THREADS,
        max_chars: int = DEFAULT_CACHED_CHARS,
    ) -> None:
        self._db = database
        self._max_threads = max_threads
        self._max_chars = max_chars
        self._cached: OrderedDict[str, _Cached] = OrderedDict()
        self._chars = 0
        # Activities read from several threads of the to_thread pool at once.
        self._lock = threading.Lock()
        self.stats = TranscriptStats()

    def since(self, thread_id: str, first: int) -> list[Message]:
        """The thread's main-transcript messages with position >= `first`, in order."""
        return messages_of(self.texts_since(thread_id, first))

    def texts_since(self, thread_id: str, first: int) -> list[MessageJson]:
        """`since`, as the kept texts (what a window is built from without parsing)."""
        with self._db.snapshot() as connection:
            return self.texts_since_in(connection, thread_id, first)

    def texts_since_in(
        self, connection: Connection, thread_id: str, first: int
    ) -> list[MessageJson]:
        """`texts_since`, read in the caller's snapshot (a step reads all it needs in one)."""
        with self._lock:
            cached = self._cached.pop(thread_id, None)
            if cached is not None:
                self._chars -= cached.chars
        revision, stored = _revision_and_count(connection, thread_id, first)
        fresh = self._refreshed(connection, thread_id, cached, first, revision, stored)
        if fresh is None:
            fresh = _Cached(first=first, revision=revision)
            fresh.extend(_rows(connection, thread_id, after=first - 1))
            self.stats.misses += 1
            self.stats.rows_loaded += len(fresh.rows)
        self._keep(thread_id, fresh)
        return list(fresh.rows)

    def forget(self, thread_id: str) -> None:
        """Drop a thread's cached transcript (evicted from the workflow cache; tests)."""
        with self._lock:
            cached = self._cached.pop(thread_id, None)
            if cached is not None:
                self._chars -= cached.chars

    def threads_held(self) -> int:
        """How many threads' transcripts are kept."""
        with self._lock:
            return len(self._cached)

    def _refreshed(
        self,
        connection: Connection,
        thread_id: str,
        cached: _Cached | None,
        first: int,
        revision: int,
        stored: int,
    ) -> _Cached | None:
        """The cached copy brought up to date by a tail read, or None when it cannot be
        (`stored`: the rows from `first` on, counted in the same snapshot)."""
        if cached is None or cached.revision != revision or first < cached.first:
            return None
        cached.trim(first)
        last = cached.positions[-1] if cached.positions else cached.first - 1
        tail = _rows(connection, thread_id, after=last)
        if stored != len(cached.rows) + len(tail):
            return None
        cached.extend(tail)
        self.stats.hits += 1
        self.stats.rows_loaded += len(tail)
        return cached

    def _keep(self, thread_id: str, cached: _Cached) -> None:
        with self._lock:
            # Two reads of one thread at once each keep a copy: the later one wins.
            replaced = self._cached.pop(thread_id, None)
            if replaced is not None:
                self._chars -= replaced.chars
            self._cached[thread_id] = cached
            self._chars += cached.chars
            while self._cached and (
                len(self._cached) > self._max_threads or self._chars > self._max_chars
            ):
                _, dropped = self._cached.popitem(last=False)
                self._chars -= dropped.chars


# Every step runs these, on the DBAPI cursor (driver_sql.py `cursor_rows`): the columns
# are text, integers and JSON, which the driver returns as Core would, JSON as text on
# SQLite. `tests/store/test_store_transcripts.py` checks the messages read equal Core's.
_COLUMNS = tuple(column.name for column in messages.columns)
_JSON_COLUMNS = frozenset(c.name for c in messages.columns if isinstance(c.type, JSON))
_ROWS_AFTER = (
    f"SELECT {', '.join(_COLUMNS)} FROM messages"
    " WHERE thread_id = ? AND depth = 0 AND position > ?"
    f" ORDER BY {', '.join(column.name for column in TRANSCRIPT_ORDER)}"
)
# The revision and the row count in one statement: one fewer a step. A miss does not
# need the count, but misses are rare and the count is an index range scan.
_REVISION_AND_COUNT = (
    "SELECT (SELECT revision FROM transcript_revisions WHERE thread_id = ?),"
    " (SELECT count(*) FROM messages WHERE thread_id = ? AND depth = 0 AND position >= ?)"
)


def _revision_and_count(connection: Connection, thread_id: str, first: int) -> tuple[int, int]:
    """The thread's transcript revision (0 before any edit) and its stored main-transcript
    rows from position `first` on."""
    [(revision, stored)] = cursor_rows(
        connection, _REVISION_AND_COUNT, (thread_id, thread_id, first)
    )
    return int(revision or 0), int(stored)


def _rows(connection: Connection, thread_id: str, *, after: int) -> list[Message]:
    return [_message(values) for values in cursor_rows(connection, _ROWS_AFTER, (thread_id, after))]


def _message(values: tuple[Any, ...]) -> Message:
    row = dict(zip(_COLUMNS, values, strict=True))
    for name in _JSON_COLUMNS:
        if isinstance(row[name], str):  # SQLite's text (these columns never hold a string)
            row[name] = json.loads(row[name])
    return row_to_message(row)
