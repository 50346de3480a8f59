"""Execution labels: run predicted and gold SQL on read-only SQLite databases and compare results.

Our own evaluator, because the popular ones are broken (test-suite-sql-eval's timeout never fires;
BIRD's counts two failing queries as equal). Comparison follows test-suite-sql-eval's
``exec_eval.result_eq`` so accuracies match published numbers:

- bag of rows; row order matters only when the gold SQL contains ``order by`` (a plain substring
  test on the lowercased gold, as test-suite does, so an ORDER BY inside a subquery counts too);
- column order is free: some permutation of the predicted columns must reproduce the gold;
- values compare with Python equality (``1 == 1.0``, ``'1' != 1``; NaN equals NaN), and the same quick
  rejection test-suite applies first (cells of a row sorted by ``str(value) + str(type)``),
  which can reject an int/float pair that would otherwise match — the reference numbers carry
  that quirk;
- with ``distinct=False`` (test-suite's default ``keep_distinct=False``) every ``DISTINCT``
  keyword is deleted from both queries before running them, also inside ``count(DISTINCT x)``.

Safety: databases are opened ``mode=ro`` with ``PRAGMA query_only=ON`` and an authorizer that
refuses ATTACH (which would create files, also via ``VACUUM INTO``), writes, DDL and PRAGMAs,
so no predicted SQL can change or create any file. A progress handler aborts queries past the
timeout. Each thread keeps up to eight such connections open between queries (a query that
fails or leaves a transaction open closes its own; a changed file is opened afresh). Results
are read one row at a time and refused (an error, like any failed query: a ``pred_error`` or
``gold_error`` outcome) once they pass ``MAX_ROWS`` rows or ``max_result_bytes`` bytes of Python
objects (default ``DEFAULT_MAX_RESULT_BYTES``; ``result_guard``), so a runaway cross join cannot
fill memory: reading stops at most one row past the budget. Such refusals are not cached, as
they depend on the budget. No single value (string, blob) may grow past ``MAX_VALUE_BYTES`` or
the budget, whichever is smaller, inside SQLite either (``SQLITE_LIMIT_LENGTH``):
``randomblob(10**9)`` fails at once instead of allocating a gigabyte. ``printf`` / ``format`` with
a ``%c`` repeated past that limit are refused (``_printf``): SQLite's loop of it runs on inside
one call, where no time limit reaches.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import json
import logging
import math
import multiprocessing
import os
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from model.data.cache import cache_dir as project_cache_dir
from model.errors import UsageError

__all__ = [
    "OUTCOMES",
    "DeadlineExceeded",
    "ResultTooLarge",
    "cancel_event",
    "cancellable",
    "check_deadline",
    "default_cache_dir",
    "execute_many",
    "execute_pairs",
    "execute_sql",
    "prepare_sql",
    "result_digest",
    "result_guard",
    "results_equal",
    "runnable_sql",
    "sqlite_sql",
    "summarize",
    "time_left",
]

log = logging.getLogger(__name__)

OUTCOMES = ("match", "mismatch", "pred_error", "timeout", "gold_error", "no_database")
DEFAULT_TIMEOUT_S = 30.0
MAX_ROWS = 1_000_000  # far above any gold result on Spider/BIRD; guards memory against cross joins
# Estimated size of a result's Python objects; the largest Spider/BIRD gold result is far below.
# Comparing two results takes a few times their size again (sorted copies of every row).
DEFAULT_MAX_RESULT_BYTES = 256 << 20
_CACHEABLE_BYTES = 8 << 20  # results larger than this are recomputed rather than cached
_PROGRESS_OPS = 1_000  # SQLite VM instructions between two deadline checks
# The bytes of temporary files SQLite may hold open in one process (a sort or a temporary table
# past its page cache spills to disk, in SQLITE_TMPDIR, TMPDIR or /var/tmp): past it the queries
# running are stopped (which query holds which file cannot be told). Read every _TEMP_CHECK_S of
# a query's run (Linux, /proc/self/fd), or 20 times what a read costs where that is more (a
# process with thousands of open files: the reads stay about 5% of the query's time).
MAX_TEMP_BYTES = 1 << 30
_TEMP_CHECK_S = 0.1
_PERMUTATION_BUDGET = 50_000  # search nodes before declaring columns unmatchable
# The longest string or blob (or row) SQLite may build while running a query: past it the query
# fails ("string or blob too big") before the value exists, so SELECT randomblob(1000000000)
# costs nothing; capped further by a call's max_result_bytes.
MAX_VALUE_BYTES = 64 << 20
# The seconds a database's whole schema may take to read (SQLite's catalogue, its keys; a DDL
# file's statements): past them, one line names the file (model.data.databases)
SCHEMA_READ_S = 60.0

Rows = list[tuple[Any, ...]]


# --------------------------------------------------------------------------------- running SQL

_DENIED_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_"))
    or name
    in (
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_INSERT",
        "SQLITE_UPDATE",
        "SQLITE_DELETE",
        "SQLITE_ALTER_TABLE",
        "SQLITE_PRAGMA",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
    )
)


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    # The second wall after mode=ro/query_only: ATTACH alone would create an empty file.
    if action in _DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() == "load_extension":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def sqlite_uri(db_path: Path) -> str:
    """The read-only URI of a SQLite file: ``mode=ro``; and ``immutable=1`` for a database in WAL
    mode that no one has open (no ``-wal`` file beside it), where ``mode=ro`` alone would leave
    ``-wal`` and ``-shm`` files next to it. ``sqlite3.OperationalError`` for one whose ``-wal``
    lies there without its ``-shm`` (`_unread_wal`).

    >>> import tempfile
    >>> db = Path(tempfile.mkdtemp()) / "w.sqlite"
    >>> with sqlite3.connect(db) as conn: _ = conn.execute("PRAGMA journal_mode=WAL").fetchall()
    >>> sqlite_uri(db).endswith("?mode=ro&immutable=1"), execute_sql(db, "SELECT 1")[0]
    (True, [(1,)])
    >>> sorted(p.name for p in db.parent.iterdir())
    ['w.sqlite']
    """
    path = Path(db_path).resolve()
    uri = f"file:{quote(str(path))}?mode=ro"
    if (refused := _unread_wal(path)) is not None:
        raise sqlite3.OperationalError(refused)
    return uri + "&immutable=1" if _in_wal_mode(path) and not path.with_name(path.name + "-wal").exists() else uri


def _in_wal_mode(path: Path) -> bool:
    """Whether the SQLite file's header says WAL mode (False where it cannot be read: SQLite says why)."""
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:19] == b"\x02"


def _unread_wal(path: Path) -> str | None:
    """Why a SQLite file in WAL mode is not read: a ``-wal`` file beside it without its ``-shm``
    (left by a writer that did not close, or copied without it). SQLite reads such a ``-wal`` only
    by writing a ``-shm`` beside it, which no read may leave; removing it afterwards is not safe
    (another process may have opened it meanwhile, a writer too) and a private copy costs the
    whole database in every process. None where it can be read without a file written."""
    wal, shm = (path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))
    if not _in_wal_mode(path) or not wal.exists() or shm.exists():
        return None
    return (f"{wal.name} lies beside it without {shm.name}: reading it would write {shm.name} there; "
            f"checkpoint it first (sqlite3 {path.name} 'PRAGMA wal_checkpoint(TRUNCATE)') or pass a copy of both files")


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(sqlite_uri(db_path), uri=True, isolation_level=None)
    conn.execute("PRAGMA query_only=ON")
    conn.set_authorizer(_authorize)
    for name in ("printf", "format"):
        conn.create_function(name, -1, _printf, deterministic=True)
    # Some Spider databases hold invalid UTF-8; test-suite decodes it the same forgiving way.
    conn.text_factory = lambda b: b.decode(errors="ignore")
    return conn


# A conversion of SQLite's printf: flags, width, precision (`*`: the next argument), its letter.
_PRINTF_SPEC = re.compile(r"%[-+ #!,0]*(\*|[0-9]*)(?:\.(\*|[0-9]*))?l{0,2}(.)", re.DOTALL)


def _printf(text, *arguments):
    """SQLite's ``printf`` / ``format``, refusing a ``%c`` repeated more than MAX_VALUE_BYTES times
    (``printf('%.*c', 2147483647, 'x')``): SQLite's loop of it goes on after the length limit
    refuses the value, about 20 s inside one call, which no progress handler or interrupt stops.
    Any other call is SQLite's own, on an in-memory connection of this thread. (SQLite reports a
    Python function's error as "user-defined function raised exception": `_run` says which.)

    >>> conn = sqlite3.connect(":memory:"); conn.create_function("printf", -1, _printf)
    >>> conn.execute("SELECT printf('%5.2f|%-3s|%.*c|%%', 3.14159, 'ab', 3, 'x')").fetchone()
    (' 3.14|ab |xxx|%',)
    >>> conn.execute("SELECT printf('%.*c', 2147483647, 'x')").fetchone()
    Traceback (most recent call last):
    sqlite3.OperationalError: user-defined function raised exception
    """
    if isinstance(text, str):
        k = 0
        for spec in _PRINTF_SPEC.finditer(text):
            width, precision, letter = spec.groups()
            if letter == "%":
                continue
            k += width == "*"
            if precision == "*":
                precision, k = (arguments[k] if k < len(arguments) else 0), k + 1
            if letter == "c" and abs(_leading_integer(precision)) > MAX_VALUE_BYTES:
                _CONNECTIONS.printf_error = f"printf: a %c repeated more than {MAX_VALUE_BYTES} times"
                raise ValueError(_CONNECTIONS.printf_error)
            k += 1
    conn = getattr(_CONNECTIONS, "printf", None)
    if conn is None or getattr(_CONNECTIONS, "printf_pid", None) != os.getpid():
        conn = _CONNECTIONS.printf = sqlite3.connect(":memory:")
        _CONNECTIONS.printf_pid = os.getpid()
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    try:
        return conn.execute(f"SELECT printf({', '.join('?' * (1 + len(arguments)))})",
                            (text, *arguments)).fetchone()[0]
    except sqlite3.Error as error:
        _CONNECTIONS.printf_error = f"printf: {error}"
        raise


def _leading_integer(value) -> int:
    """A value as SQLite reads an integer argument: a number's whole part, a string's leading
    digits (``'12ab'`` is 12), else 0."""
    if isinstance(value, (int, float)):
        return int(value) if abs(value) < 1e18 else 1 << 62
    if isinstance(value, bytes):
        value = value.decode(errors="ignore")
    match = re.match(r"\s*([-+]?[0-9]{1,19})", value) if isinstance(value, str) else None
    return int(match.group(1)) if match else 0


def _open(db_path: Path) -> sqlite3.Connection:
    """This thread's open read-only connection to ``db_path``, kept between queries (opening one
    and reading the schema cost ~17x a small query); reopened when the file changes (inode,
    size, mtime) and never shared across a fork. `_run` keeps a connection only after a query that
    succeeded and left no transaction open."""
    try:
        key = _identity(db_path)
    except OSError:
        return _connect(db_path)  # let SQLite say why it cannot open it
    kept = _kept()
    for stale in [k for k in kept if k[0] == key[0] and k != key]:  # the file changed or was replaced:
        kept.pop(stale).close()  # its old connection would hold the old file (and its disk space) open
    conn = kept.pop(key, None)  # out while in use; put back (most recent last) by _keep
    return conn if conn is not None else _connect(db_path)


def _identity(db_path: Path) -> tuple:
    """What a kept connection is kept under: the file (inode, mtime, size) and whether a
    ``-wal`` file lies beside it (a connection opened ``immutable`` must not outlive one)."""
    stat = Path(db_path).stat()
    return (str(db_path), stat.st_ino, stat.st_mtime_ns, stat.st_size, os.path.exists(f"{db_path}-wal"))


def _keep(db_path: Path, conn: sqlite3.Connection) -> None:
    try:
        key = _identity(db_path)
    except OSError:
        conn.close()
        return
    cached = _kept()
    cached[key] = conn
    while len(cached) > _OPEN_CONNECTIONS:
        cached.pop(next(iter(cached))).close()


def _kept() -> dict:
    """This thread's kept connections: ``_identity(path)`` -> connection."""
    if getattr(_CONNECTIONS, "pid", None) != os.getpid():  # a new thread, or a forked child:
        _CONNECTIONS.pid, _CONNECTIONS.open = os.getpid(), {}  # never the parent's connections
    return _CONNECTIONS.open


_CONNECTIONS = threading.local()
_OPEN_CONNECTIONS = 8  # per thread


class ResultTooLarge(Exception):
    """A result past its memory guards (rows, bytes): ``result_guard`` stopped reading it."""


def result_guard(max_rows: int, max_bytes: int) -> Callable[[Any, tuple], tuple]:
    """``guard(cursor, row)`` (a ``sqlite3`` row factory's signature; other callers pass None):
    ``row``, counted, or ``ResultTooLarge`` once the rows counted pass ``max_rows`` rows or
    ``max_bytes`` bytes of Python objects (a list slot, the tuple, its values). Each row is counted
    as it is read, so reading stops at most one row past the budget.

    >>> guard = result_guard(max_rows=10, max_bytes=2000)
    >>> guard(None, ("a", 1))
    ('a', 1)
    >>> guard(None, ("a" * 5000,))
    Traceback (most recent call last):
    ...
    model.data.execution.ResultTooLarge: result larger than 0.00190735 MiB (past it after 2 rows)
    """
    size = count = 0
    getsizeof = sys.getsizeof

    def guard(_cursor: Any, row: tuple) -> tuple:
        nonlocal size, count
        count += 1
        size += 8 + getsizeof(row) + sum(map(getsizeof, row))
        if count > max_rows:
            raise ResultTooLarge(f"result has more than {max_rows} rows")
        if size > max_bytes:
            raise ResultTooLarge(f"result larger than {max_bytes / 2**20:g} MiB (past it after {count} rows)")
        return row

    return guard


def _run(
    db_path: Path, sql: str, timeout_s: float, max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    max_rows: int = MAX_ROWS,
) -> tuple[str, Any]:
    """("ok", rows) | ("error", message) | ("timeout", message) | ("too_large", message);
    never raises."""
    if not sql.strip().rstrip(";").strip():
        return "error", "empty SQL"
    deadline = time.monotonic() + timeout_s
    timed_out = spilled = False
    next_look = time.monotonic() + _TEMP_CHECK_S

    def past_deadline() -> int:
        nonlocal timed_out, spilled, next_look
        now = time.monotonic()
        timed_out = now > deadline or _cancelled()
        if now > next_look and not timed_out:
            spilled = (sqlite_temp_bytes() or 0) > MAX_TEMP_BYTES
            next_look = now + max(_TEMP_CHECK_S, 20 * (time.monotonic() - now))
        return int(timed_out or spilled)  # non-zero makes SQLite interrupt the statement

    conn = None
    kept = False
    _CONNECTIONS.printf_error = None
    try:
        conn = _open(db_path)
        conn.set_progress_handler(past_deadline, _PROGRESS_OPS)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, min(MAX_VALUE_BYTES, max_bytes)))
        cursor = conn.cursor()
        # each row counted as SQLite hands it over: a batch of huge rows cannot overshoot
        cursor.row_factory = result_guard(max_rows, max_bytes)
        cursor.execute(sql)
        if cursor.description is None:
            return "error", "statement returns no result set"
        rows = cursor.fetchall()
        if not conn.in_transaction:
            _keep(db_path, conn)
            kept = True
        return "ok", rows
    except ResultTooLarge as error:
        return "too_large", str(error)
    except Exception as error:  # noqa: BLE001  (sqlite3.Error, MemoryError, ...: a failed query)
        if timed_out:
            return "timeout", f"timeout after {timeout_s:g} s"
        if spilled:
            return "too_large", f"temporary files past {MAX_TEMP_BYTES / 2**20:g} MiB (this process's, on disk)"
        printf_error = getattr(_CONNECTIONS, "printf_error", None)
        if printf_error is not None and "user-defined function" in str(error):
            return "error", f"{type(error).__name__}: {printf_error}"
        return "error", f"{type(error).__name__}: {error}"
    finally:
        if conn is not None and not kept:
            conn.close()


def sqlite_temp_bytes() -> int | None:
    """The bytes of SQLite's temporary files that this process holds open (``etilqs_*``, removed
    from their folder as they are opened, so only their open descriptors show them): read from
    ``/proc/self/fd``; None where there is none (not Linux).

    >>> sqlite_temp_bytes() is None or sqlite_temp_bytes() >= 0
    True
    """
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    total = 0
    for name in names:
        try:
            if "/etilqs_" in os.readlink(f"/proc/self/fd/{name}"):
                total += os.stat(f"/proc/self/fd/{name}").st_size
        except OSError:  # closed since it was listed
            continue
    return total


def execute_sql(
    db_path: Path,
    sql: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    max_rows: int = MAX_ROWS,
) -> tuple[Rows | None, str | None]:
    """Run one query read-only: ``(rows, None)``, or ``(None, error)`` (``"timeout ..."`` on timeout,
    ``"result larger than ..."`` / ``"result has more than ..."`` past the memory guards: an
    estimated ``max_result_bytes``, ``max_rows`` rows).

    >>> import tempfile
    >>> db = Path(tempfile.mkdtemp()) / "t.sqlite"
    >>> with sqlite3.connect(db) as conn: _ = conn.execute("CREATE TABLE t(x)")
    >>> execute_sql(db, "SELECT 1, 'a'")
    ([(1, 'a')], None)
    >>> execute_sql(db, "DROP TABLE t")[1]
    'DatabaseError: not authorized'
    """
    status, payload = _run(Path(db_path), sql, timeout_s, max_result_bytes, max_rows)
    return (payload, None) if status == "ok" else (None, payload)


# The errors of a query that the database did not fail but that was not read to the end, as
# every backend (model.data.databases) writes them: past the time limit, past a memory guard
# (DuckDB's working memory too).
UNFINISHED = ("timeout after ", "result has more than ", "result larger than ", "working memory past ",
              "temporary files past ")


def unfinished(error: str | None) -> bool:
    """Whether ``error`` says the query was stopped (a timeout, a result past the memory guards)
    rather than failed by the database: its result is unknown, not wrong.

    >>> unfinished("timeout after 5 s"), unfinished("OperationalError: no such column: x")
    (True, False)
    """
    return error is not None and error.startswith(UNFINISHED)


def sqlite_problem(db_path: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> str | None:
    """Why ``db_path`` cannot be read as a SQLite database (missing, a folder, empty, not SQLite,
    a ``-wal`` beside it that only a write could read: `_unread_wal`), or None: one read of its
    catalogue, given ``timeout_s`` but at least ``SCHEMA_READ_S`` (SQLite parses the whole
    catalogue first, seconds for a schema of millions of columns).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()); (folder / "notes.txt").write_text("hello")
    5
    >>> sqlite_problem(folder / "notes.txt")
    'cannot be read as a SQLite database (DatabaseError: file is not a database)'
    >>> sqlite_problem(folder / "none.sqlite"), sqlite_problem(folder)
    ('no such database file', 'not a file')
    """
    path = Path(db_path)
    try:
        if not path.is_file():
            return "not a file" if path.exists() else "no such database file"
        if (refused := _unread_wal(path.resolve())) is not None:
            return refused
    except (OSError, ValueError) as error:  # a name too long, a NUL, not Unicode
        return f"not a path that can be read ({type(error).__name__}: {str(error)[:120]})"
    # (SQLite parses the whole catalogue on a connection's first read: a read of a schema's time)
    _, error = execute_sql(path, "SELECT count(*) FROM sqlite_master", max(timeout_s, SCHEMA_READ_S), max_rows=1)
    return None if error is None else f"cannot be read as a SQLite database ({error})"


class DeadlineExceeded(TimeoutError):
    """A request's time budget ran out while its work was being done (``check_deadline``)."""


def check_deadline(deadline: float | None, what: str = "scoring") -> None:
    """Raise ``DeadlineExceeded`` when ``time.monotonic()`` is past ``deadline`` (None: no limit)
    or this thread's work was cancelled (``cancellable``). In a ``paced`` thread, first pause as
    its share of the CPU asks."""
    if getattr(_PACE, "share", None) is not None:
        _pause(deadline)
    if _cancelled():
        raise DeadlineExceeded(f"{what} was cancelled")
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded(f"{what} ran past its time limit")


_CANCEL = threading.local()


@contextlib.contextmanager
def cancellable(cancel: threading.Event):
    """``with cancellable(cancel):`` this thread's work stops once another thread sets ``cancel``:
    at its next deadline check (``check_deadline``, ``time_left``: ``DeadlineExceeded``), a SQLite
    query it is running within a thousand steps, a PostgreSQL, MySQL or DuckDB one within about
    0.1 s (``model.data.databases``, through ``cancel_event``), a ``paced`` pause at once.
    rat-serve cancels a request whose client closed its connection.

    >>> cancel = threading.Event()
    >>> with cancellable(cancel):
    ...     check_deadline(None)  # not cancelled: goes on
    ...     cancel.set()
    ...     check_deadline(None)
    Traceback (most recent call last):
    ...
    model.data.execution.DeadlineExceeded: scoring was cancelled
    """
    _CANCEL.event = cancel
    try:
        yield
    finally:
        _CANCEL.event = None


def cancel_event() -> threading.Event | None:
    """The event that cancels this thread's work (``cancellable``), or None."""
    return getattr(_CANCEL, "event", None)


def _cancelled() -> bool:
    event = cancel_event()
    return event is not None and event.is_set()


_PACE = threading.local()
PACE_SLICE_S = 0.002  # CPU seconds a paced thread works between pauses, at least
PACE_MAX_PAUSE = 20  # a pause lasts at most this many times the others' share in wall time


@contextlib.contextmanager
def paced(share: float, only_while: Callable[[], bool] | None = None):
    """``with paced(share):`` this thread's work pauses at each deadline check (every query, every
    database read, before the model and the reasons: ``check_deadline``, ``time_left``) until the
    process's other threads have had ``1 - share`` of the CPU time since its last pause (or a
    while has passed: ``PACE_MAX_PAUSE``); ``only_while``: only while it returns True (the work
    done meanwhile is not paid for later). rat-serve scores a heavy request this way while other
    requests are being scored, so they keep most of the CPU and the interpreter lock.

    >>> start, cpu = time.monotonic(), time.thread_time()
    >>> with paced(0.25):  # 5 ms of work, a deadline check between small steps
    ...     while time.thread_time() - cpu < 0.005:
    ...         check_deadline(None)
    >>> time.monotonic() - start > 3 * (time.thread_time() - cpu)  # no other thread: paused the longest
    True
    """
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1]; found {share}")
    _PACE.share, _PACE.only_while, _PACE.cpu = share, only_while, time.thread_time()
    try:
        yield
    finally:
        _PACE.share = None


def _pause(deadline: float | None) -> None:
    """A paced thread's pause for the CPU time it used since its last one: until the process's
    other threads have used their share of the CPU after it (on a busy machine that takes longer
    than the same time asleep), they stop wanting it (``only_while``), or ``deadline`` comes."""
    used = time.thread_time() - _PACE.cpu
    wanted = _PACE.only_while
    if wanted is not None and not wanted():
        _PACE.cpu = time.thread_time()
        return
    if used < PACE_SLICE_S:
        return
    others = used * (1 - _PACE.share) / _PACE.share
    start_cpu, start = time.process_time(), time.monotonic()
    end = start + PACE_MAX_PAUSE * others if deadline is None else min(deadline, start + PACE_MAX_PAUSE * others)
    while (time.process_time() - start_cpu < others and (wanted is None or wanted()) and time.monotonic() < end
           and not _cancelled()):
        time.sleep(min(PACE_SLICE_S, others))
    _PACE.cpu = time.thread_time()


def time_left(deadline: float | None, timeout_s: float, what: str = "scoring") -> float:
    """``timeout_s``, or less when ``deadline`` comes first; ``DeadlineExceeded`` when it has passed."""
    check_deadline(deadline, what)
    return timeout_s if deadline is None else min(timeout_s, deadline - time.monotonic())


# ----------------------------------------------------------------------- test-suite semantics

_POSTPROCESS = (("> =", ">="), ("< =", "<="), ("! =", "!="))
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.IGNORECASE)
# Quoted strings/identifiers are single tokens, so a 'distinct' inside a literal is kept.
_TOKEN = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\w+|\s+|.""", re.DOTALL)


def prepare_sql(sql: str, distinct: bool = False) -> str:
    """The SQL test-suite-sql-eval actually runs: ``> =`` joined, ``YEAR(CURDATE())`` -> 2020, and
    unless ``distinct``, every DISTINCT keyword removed.

    >>> prepare_sql("SELECT count(DISTINCT name) FROM t WHERE a > = 'distinct'")
    "SELECT count( name) FROM t WHERE a >= 'distinct'"
    """
    for spaced, joined in _POSTPROCESS:
        sql = sql.replace(spaced, joined)
    if not distinct:
        sql = "".join(tok for tok in _TOKEN.findall(sql) if tok.lower() != "distinct")
    return _CUR_YEAR.sub("2020", sql)


def _order_matters(gold_sql: str) -> bool:
    return "order by" in gold_sql.lower()


def _unorder_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def results_equal(gold: Rows, pred: Rows, order_matters: bool) -> bool:
    """test-suite-sql-eval's ``result_eq``: is ``pred`` the gold bag (or list) of rows, up to a
    permutation of its columns?

    >>> results_equal([(1, "a"), (2, "b")], [("b", 2.0), ("a", 1)], order_matters=False)
    True
    >>> results_equal([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=True)
    False
    >>> results_equal([(1,), (1,)], [(1,)], order_matters=False)
    False

    NaN (a float PostgreSQL and DuckDB return; SQLite has none) equals NaN here:

    >>> results_equal([(float("nan"), "a")], [("a", float("nan"))], order_matters=False)
    True
    """
    if not gold and not pred:
        return True
    gold, pred = _one_nan(gold), _one_nan(pred)
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False
    gold_unordered = [_unorder_row(row) for row in gold]
    pred_unordered = [_unorder_row(row) for row in pred]
    if order_matters:
        if gold_unordered != pred_unordered:
            return False
    elif set(gold_unordered) != set(pred_unordered):
        return False
    if (gold == pred) if order_matters else (Counter(gold) == Counter(pred)):
        return True  # the identity permutation: the common case, no search needed
    return _column_permutation_exists(gold, pred, order_matters)


_NAN = float("nan")  # the one NaN of compared rows: the same object is equal to itself in tuples, sets, Counters


def _one_nan(rows: Rows) -> Rows:
    """``rows`` with every NaN the same object ``_NAN`` (``nan == nan`` is False, but a tuple,
    a set or a Counter first compares its items by identity)."""
    if not any(isinstance(v, float) and math.isnan(v) for row in rows for v in row):
        return rows
    return [tuple(_NAN if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows]


def _column_permutation_exists(gold: Rows, pred: Rows, order_matters: bool) -> bool:
    """Whether some column permutation maps ``pred`` onto ``gold`` (same list or same bag).

    test-suite enumerates permutations (n! on wide results); identical columns are
    interchangeable, so we search over classes of identical columns, most constrained first,
    and prune with the bag of partial rows after every assigned column.
    """
    gold_cols = list(zip(*gold, strict=True))
    pred_cols = list(zip(*pred, strict=True))
    if order_matters:  # the list of rows is equal iff the bags of column vectors are
        return Counter(gold_cols) == Counter(pred_cols)

    def signature(column: tuple[Any, ...]) -> frozenset[tuple[Any, int]]:
        return frozenset(Counter(column).items())

    remaining = Counter(pred_cols)  # pred column vector -> how many such columns are unassigned
    classes = list(remaining)
    class_signature = [signature(c) for c in classes]
    candidates = []
    for column in gold_cols:
        sig = signature(column)
        candidates.append([k for k, s in enumerate(class_signature) if s == sig])
    order = sorted(range(len(gold_cols)), key=lambda i: len(candidates[i]))
    budget = _PERMUTATION_BUDGET

    def search(
        depth: int, gold_keys: list[tuple[Any, ...]], pred_keys: list[tuple[Any, ...]]
    ) -> bool:
        nonlocal budget
        if depth == len(order):
            return True
        i = order[depth]
        for k in candidates[i]:
            if remaining[classes[k]] == 0:
                continue
            budget -= 1
            if budget < 0:
                return False
            next_gold = [key + (value,) for key, value in zip(gold_keys, gold_cols[i], strict=True)]
            next_pred = [key + (value,) for key, value in zip(pred_keys, classes[k], strict=True)]
            if Counter(next_gold) != Counter(next_pred):
                continue
            remaining[classes[k]] -= 1
            found = search(depth + 1, next_gold, next_pred)
            remaining[classes[k]] += 1
            if found:
                return True
        return False

    empty = [()] * len(gold)
    found = search(0, empty, empty)
    if budget < 0:
        log.warning("column permutation search gave up after %d steps", _PERMUTATION_BUDGET)
    return found


def _outcome(gold: tuple[str, Any], pred: tuple[str, Any], order_matters: bool) -> str:
    # "error" and "too_large" (past the memory guards) are both failed queries.
    if gold[0] != "ok":
        return "gold_error"
    if pred[0] == "timeout":
        return "timeout"
    if pred[0] != "ok":
        return "pred_error"
    return "match" if results_equal(gold[1], pred[1], order_matters) else "mismatch"


def summarize(outcomes: Iterable[str]) -> dict[str, int]:
    """Count of each outcome, every outcome present (zero if absent), in ``OUTCOMES`` order.

    >>> summarize(["match", "match", "timeout"])["match"]
    2
    """
    counts = Counter(outcomes)
    unknown = set(counts) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; expected some of {OUTCOMES}")
    return {name: counts[name] for name in OUTCOMES}


# ---------------------------------------------------------------------------------- disk cache


class _Cache:
    """Execution results on disk, keyed by (sha256 of the database's content, SQL, timeout), stored
    as JSON (``_encoded``): reading the cache never runs code, and an entry that cannot be read back
    as a result is a miss (the query runs again). The content is the file's bytes, followed by its
    ``-wal`` file's where that is not empty (a database in WAL mode with commits not yet written
    back); each file's sha256 is remembered under its state (``_file_state``).

    Only the parent process reads and writes it, so worker processes never contend for locks.
    """

    def __init__(self, cache_dir: Path) -> None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(cache_dir / "execution.sqlite", timeout=60)
        # `result` held pickles (older versions): never read, dropped
        self.conn.executescript(
            """
            DROP TABLE IF EXISTS result;
            CREATE TABLE IF NOT EXISTS result_json (
                db_sha256 TEXT, sql TEXT, timeout_s REAL, status TEXT, payload TEXT,
                PRIMARY KEY (db_sha256, sql, timeout_s));
            DROP TABLE IF EXISTS db_file;
            CREATE TABLE IF NOT EXISTS db_state (path TEXT PRIMARY KEY, state TEXT, sha256 TEXT);
            """
        )

    def db_sha256(self, path: Path) -> str:
        """sha256 of a database's content: its file's bytes, then its ``-wal`` file's where that
        is not empty; hashed again only when the state (``_file_state``) of either changed."""
        path = path.resolve()
        files, states = [path], [_file_state(path)]
        wal = path.with_name(path.name + "-wal")
        with contextlib.suppress(FileNotFoundError):
            if (wal_state := _file_state(wal))[-1]:
                files.append(wal)
                states.append(wal_state)
        key = json.dumps(states)
        row = self.conn.execute(
            "SELECT sha256 FROM db_state WHERE path = ? AND state = ?", (str(path), key)
        ).fetchone()
        if row:
            return row[0]
        digest = _files_sha256(files)
        if time.time_ns() - max(max(mtime, ctime) for _, mtime, ctime, _ in states) > _RACY_NS:
            with self.conn:
                self.conn.execute("INSERT OR REPLACE INTO db_state VALUES (?, ?, ?)", (str(path), key, digest))
        return digest

    def get(self, db_sha256: str, sql: str, timeout_s: float) -> tuple[str, Any] | None:
        row = self.conn.execute(
            "SELECT status, payload FROM result_json WHERE db_sha256 = ? AND sql = ? AND timeout_s = ?",
            (db_sha256, sql, timeout_s),
        ).fetchone()
        return _decoded(*row) if row else None

    def put_many(self, entries: list[tuple[str, str, float, tuple[str, Any]]]) -> None:
        values = []
        for db_sha256, sql, timeout_s, (status, payload) in entries:
            if status == "too_large":  # depends on the memory budget, which is not in the key
                continue
            text = _encoded(payload)
            if len(text) <= _CACHEABLE_BYTES:
                values.append((db_sha256, sql, timeout_s, status, text))
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO result_json VALUES (?, ?, ?, ?, ?)", values)

    def close(self) -> None:
        self.conn.close()


_VALUE_TYPES = frozenset({int, float, str, bytes, type(None)})  # what SQLite returns


def _encoded(payload: Rows | str) -> str:
    """A result's rows (or an error's message) as JSON: rows as lists, a blob as
    ``{"bytes": base64}``, floats as Python writes them (``NaN``, ``Infinity``, exact).

    >>> _encoded([(1, 2.5, "a", b"\\x00", None, float("inf"))])
    '[[1,2.5,"a",{"bytes":"AA=="},null,Infinity]]'
    >>> rows = [(1, 0.1, "é", b"\\xff", None, float("-inf"), 2**62)]
    >>> _decoded("ok", _encoded(rows)) == ("ok", rows)
    True
    """
    def blob(value: Any) -> dict[str, str]:
        if type(value) is not bytes:
            raise TypeError(f"{type(value).__name__} is not a value of a result")
        return {"bytes": base64.b64encode(value).decode()}

    return json.dumps(payload, default=blob, separators=(",", ":"))


def _decoded(status: str, text: Any) -> tuple[str, Any] | None:
    """A cache entry read back: ``(status, rows)`` of rows of SQLite's values, all the same
    width, or ``(status, message)``; None (a miss) for anything else.

    >>> _decoded("ok", '[[1, {"bytes": 5}]]'), _decoded("error", "[1]"), _decoded("ok", "{")
    (None, None, None)
    """
    try:
        payload = json.loads(text, object_hook=lambda d: base64.b64decode(d["bytes"], validate=True))
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error):
        return None
    if status in ("error", "timeout"):
        return (status, payload) if isinstance(payload, str) else None
    if status != "ok" or not isinstance(payload, list) or not all(type(row) is list for row in payload):
        return None
    if len({len(row) for row in payload}) > 1 or not all(type(v) in _VALUE_TYPES for row in payload for v in row):
        return None
    return status, [tuple(row) for row in payload]


def _file_state(path: Path) -> tuple[int, int, int, int]:
    """What a file's remembered sha256 is kept under: inode, mtime, ctime, size. The kernel sets
    the ctime on every change (``os.utime`` restoring the mtime included); an edit in the same
    tick of the file system's clock as the one before it may keep all four, so ``db_sha256``
    remembers nothing for a file changed in the last ``_RACY_NS``."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size


_RACY_NS = 2 * 10**9


def _files_sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------ pairs


def _run_job(job: tuple[str, str, float, int]) -> tuple[str, Any]:
    db_path, sql, timeout_s, max_bytes = job
    return _run(Path(db_path), sql, timeout_s, max_bytes)


def _run_jobs(
    jobs: list[tuple[str, str]],
    timeout_s: float,
    workers: int,
    progress: bool,
    cache: _Cache | None,
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> dict[tuple[str, str], tuple[str, Any]]:
    """Result of every distinct (database, SQL) job, from the cache or by running it."""
    from tqdm import tqdm

    results: dict[tuple[str, str], tuple[str, Any]] = {}
    db_hash: dict[str, str] = {}
    todo = []
    for db, sql in jobs:
        if cache is not None:
            if db not in db_hash:
                db_hash[db] = cache.db_sha256(Path(db))
            hit = cache.get(db_hash[db], sql, timeout_s)
            if hit is not None:
                results[db, sql] = hit
                continue
        todo.append((db, sql))

    bar = tqdm(
        total=len(todo),
        desc="executing SQL",
        unit="query",
        disable=not progress or not todo,
        file=sys.stderr,
    )
    pending: list[tuple[str, str, float, tuple[str, Any]]] = []

    def record(job: tuple[str, str], result: tuple[str, Any]) -> None:
        results[job] = result
        bar.update()
        if cache is not None:
            pending.append((db_hash[job[0]], job[1], timeout_s, result))
            if len(pending) >= 500:  # commit as we go: an interrupted run keeps its work
                cache.put_many(pending)
                pending.clear()

    args = [(db, sql, timeout_s, max_bytes) for db, sql in todo]
    processes = min(workers, len(todo))  # never more processes than queries to run
    if processes > 1:
        # spawn, not fork: the parent may hold threads (torch, tokenizers) that fork would break
        from model.errors import start_pool

        with start_pool(multiprocessing.get_context("spawn"), processes) as pool:
            # big enough chunks that inter-process traffic does not dominate millisecond queries
            chunksize = max(1, min(32, len(args) // (8 * processes)))
            for job, result in zip(
                todo, pool.imap(_run_job, args, chunksize=chunksize), strict=True
            ):
                record(job, result)
    else:
        for job, arg in zip(todo, args, strict=True):
            record(job, _run_job(arg))
    bar.close()
    if cache is not None and pending:
        cache.put_many(pending)
    return results


def execute_many(
    jobs: Sequence[tuple[Path | str, str]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path | None = None,
    workers: int = 1,
    progress: bool = True,
) -> list[tuple[Rows | None, str | None]]:
    """``execute_sql``'s answer for each ``(db_path, sql)``, in order: each distinct one run once,
    across ``workers`` processes, read from / written to the result cache under ``cache_dir``
    (``execute_pairs``' cache: a query it has run is not run again)."""
    keyed = [(str(Path(db).resolve()), sql) for db, sql in jobs]
    cache = _Cache(Path(cache_dir)) if cache_dir is not None else None
    try:
        results = _run_jobs(list(dict.fromkeys(keyed)), timeout_s, max(1, workers), progress, cache)
    finally:
        if cache is not None:
            cache.close()
    return [(payload, None) if status == "ok" else (None, payload) for status, payload in map(results.get, keyed)]


def result_digest(rows: Rows) -> str:
    """A digest of a result as a multiset of rows: equal for two results with the same rows in
    any order.

    >>> result_digest([(1, "a"), (2, None)]) == result_digest([(2, None), (1, "a")])
    True
    """
    return hashlib.sha1(repr(sorted(map(repr, rows))).encode()).hexdigest()


def execute_pairs(
    pairs: Sequence[tuple[Path | str | None, str, str]],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path | None = None,
    workers: int = 1,
    distinct: bool = False,
    progress: bool = True,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> list[str]:
    """Outcome of each ``(db_path or None, pred_sql, gold_sql)`` pair, in order (see ``OUTCOMES``).

    Each distinct (database, SQL) is executed once, across ``workers`` processes (at most one per
    query to run), and its result cached under ``cache_dir`` (if given) so re-runs only compare.
    Never raises on bad SQL. A result past ``max_result_bytes`` or ``MAX_ROWS`` is a failed query.
    """
    resolved: dict[Path | str, str] = {}
    for db, _, _ in pairs:
        if db is not None and db not in resolved:
            resolved[db] = str(Path(db).resolve())
    prepared = [
        (
            None if db is None else resolved[db],
            prepare_sql(pred, distinct),
            prepare_sql(gold, distinct),
        )
        for db, pred, gold in pairs
    ]
    jobs = list(
        dict.fromkeys((db, sql) for db, p, g in prepared if db is not None for sql in (g, p))
    )
    cache = _Cache(Path(cache_dir)) if cache_dir is not None else None
    try:
        results = _run_jobs(
            jobs, timeout_s, max(1, workers), progress, cache, max_result_bytes
        )
    finally:
        if cache is not None:
            cache.close()
    return [
        "no_database"
        if db is None
        else _outcome(results[db, gold], results[db, pred], _order_matters(gold))
        for db, pred, gold in prepared
    ]


def database_outcome(database, pred_sql: str, gold_sql: str, pred_dialect: str = "sqlite",
                     gold_dialect: str = "sqlite", schema=None) -> str:
    """``execute_pairs``' outcome of one ``(pred_sql, gold_sql)`` pair on an open
    ``model.data.databases.Database`` of any backend (PostgreSQL, MySQL, DuckDB, SQLite), each
    query run as ``runnable_sql`` writes its dialect there (as written: none of test-suite's
    benchmark habits, DISTINCT kept) and the results compared as ``execute_pairs`` compares
    them: ``gold_error`` where the gold query fails, is stopped or cannot be written for the
    backend; ``pred_error`` where the prediction is not one query in its dialect (it runs
    nowhere); ``no_database`` where it is one that cannot be written so (no execution label);
    ``timeout`` where it ran out of time, and ``pred_error`` where its result went past the
    memory guards (as ``execute_pairs`` counts a SQLite file's)."""
    def ran(sql: str, dialect: str) -> tuple[str, Any]:
        rows, error = database.run(sql, dialect, schema)
        if error is None:
            return "ok", rows
        if error.startswith(NOT_WRITTEN):
            return "unwritten", error
        return ("timeout" if error.startswith(UNFINISHED[0]) else "too_large" if unfinished(error) else "error"), error

    gold = ran(gold_sql, gold_dialect)
    if gold[0] != "ok":
        return "gold_error"
    pred = ran(pred_sql, pred_dialect)
    if pred[0] == "unwritten":
        return "pred_error" if _unparsable(pred_sql, pred_dialect) else "no_database"
    return _outcome(gold, pred, _order_matters(gold_sql))


# -------------------------------------------------------------------------------------- CLI


def default_cache_dir() -> Path:
    """Where execution results are cached by default: ``cache_dir("exec")`` (``model.data.cache``:
    ``$RAT_CACHE``, a checkout's ``.cache``, else the user cache folder)."""
    return project_cache_dir("exec")


def evaluate_on_database(database, predictions: Path, dialect: str | None = None,
                         progress: bool = True) -> dict[str, Any]:
    """Execution accuracy of a file of rows ``{sql, gold[, dialect, gold_dialect]}`` (JSONL, JSON or
    CSV) on one open ``model.data.databases.Database``: each pair run there read-only, each
    query in its dialect (a row's own, else ``dialect``, else the database's), compared as
    ``execute_pairs`` compares (``database_outcome``). A row without both strings is left out
    and counted in ``skipped_rows``; a gold query that fails counts as ``gold_error``, outside
    the accuracy, as ``model.data.exec_command.evaluate_file`` counts it."""
    from tqdm.auto import tqdm

    from model.data.jsonl import read_rows
    from rat.dialects import DIALECTS

    own = (dialect or database.dialect).lower()
    skipped: Counter[str] = Counter()
    pairs = []
    for row in read_rows(predictions, skipped):
        if not (isinstance(row.get("sql"), str) and row["sql"].strip() and isinstance(row.get("gold"), str)
                and row["gold"].strip()):
            skipped["no sql or gold string"] += 1
            continue
        written = str(row.get("dialect") or own).lower(), str(row.get("gold_dialect") or row.get("dialect") or own).lower()
        if not set(written) <= set(DIALECTS):
            skipped["unknown dialect"] += 1
            continue
        pairs.append((row["sql"], row["gold"], *written))
    schema = None  # another dialect's SQL is written with the database's names (SQLite's "strings")
    if any(d != database.dialect for pair in pairs for d in pair[2:]):
        try:
            schema = database.schema()
        except UsageError:  # (DatabaseError) a catalogue it cannot read: written without names
            schema = None
    outcomes = [database_outcome(database, sql, gold, pred_dialect, gold_dialect, schema)
                for sql, gold, pred_dialect, gold_dialect
                in tqdm(pairs, desc="executing", unit="pair", disable=not progress, leave=False)]
    counts = summarize(outcomes)
    with_database = len(outcomes) - counts["no_database"] - counts["gold_error"]
    return {"predictions": str(predictions), "database": database.name, "questions": len(pairs),
            "with_database": with_database,
            "execution_accuracy": counts["match"] / with_database if with_database else None,
            "outcomes": counts, "skipped_rows": dict(skipped)}


def runnable_sql(sql: str, dialect: str = "sqlite", backend: str = "sqlite", schema=None,
                 table_names=None) -> str | None:
    """``sql``, written in ``dialect``, as a ``backend`` database (a rat dialect name) runs it:
    itself when the two agree, else sqlglot's translation (``DISTINCT ON`` becomes a
    ``ROW_NUMBER()`` window in SQLite, ``ILIKE`` ``lower(..) LIKE lower(..)``, ``TOP n``
    ``LIMIT n``); SQLite's SQL goes through ``model.data.transpile.from_sqlite``, which reads
    its double-quoted strings as SQLite does (with ``schema``'s column names, when given) and
    writes the SQLite habits PostgreSQL and DuckDB refuse as SQLite means them (a column neither
    grouped nor aggregated: ``any_value``, or ``arg_max`` beside one ``max()``; a quoted name in
    another case; a compared subquery's first row; with ``schema``'s column types, comparisons
    and sums as SQLite's type affinity makes them: ``horsepower > '150'`` for a TEXT column),
    and where the backend's LIKE tells case apart, SQLite's LIKE runs as ILIKE; ``table_names``
    (lowercased name -> the database's spelling, or a ``model.data.transpile.Spelling``: its
    columns and other schemas' tables too) spells the names where SQLite's are lowercased
    (PostgreSQL, MySQL). None where sqlglot cannot read it or write it for ``backend``,
    writes what the backend's SQL cannot say (`rat` refuses it there: DuckDB's `* EXCLUDE (a)`
    for SQLite) or another query (a limit's `WITH TIES` dropped), or it calls a SQLite function
    the backend has not: the execution features are then unknown, as without a database
    (``not_written`` says why). The execution evaluator, the node features and rat-calibrate all
    run another dialect's SQL through this one function.

    >>> runnable_sql("SELECT TOP 5 name FROM singer", "tsql")
    'SELECT name FROM singer LIMIT 5'
    >>> runnable_sql("SELECT name FROM singer WHERE name ILIKE 'a%'", "postgres")
    "SELECT name FROM singer WHERE LOWER(name) LIKE LOWER('a%')"
    >>> runnable_sql('SELECT name FROM singer WHERE country = "France" LIMIT 2', "sqlite", "postgres",
    ...              {"singer": ["name", "country"]})
    "SELECT name FROM singer WHERE country = 'France' LIMIT 2"
    >>> runnable_sql("SELECT * EXCLUDE (age) FROM singer", "duckdb"), runnable_sql(
    ...     "SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS WITH TIES", "postgres")
    (None, None)

    A locking read (``FOR UPDATE``, ``LOCK IN SHARE MODE``) runs on MySQL without its lock, which
    its read-only transactions refuse: the same rows. (PostgreSQL's keeps it: the database first
    refuses what it cannot lock, an aggregate, ``DISTINCT``, ``GROUP BY``, ``UNION``, a window,
    then the lock itself; ``model.data.databases`` reads its rows without the lock then.)

    >>> runnable_sql("SELECT name FROM singer WHERE age > 20 FOR UPDATE", "mysql", "mysql")
    'SELECT name FROM singer WHERE age > 20'
    """
    if backend == "mysql":
        sql = unlocked_sql(sql, dialect)
    if dialect == backend:
        return sql
    return _written(sql, dialect, backend, schema, table_names)[0]


def _written(sql: str, dialect: str, backend: str, schema, table_names) -> tuple[str | None, str | None]:
    """`_transpiled`'s answer, cached where ``schema`` is a `rat.Schema` or None (on a deep
    stack where the query's nesting needs one: ``rat.errors.deeply``)."""
    import rat
    from model.data.transpile import Spelling
    from rat.errors import DepthError, deeply

    names = table_names if isinstance(table_names, Spelling) else tuple(sorted(table_names.items())) if table_names else None
    cached = schema is None or isinstance(schema, rat.Schema)
    try:
        return deeply(_transpiled if cached else _transpiled.__wrapped__, sql, dialect, backend, schema, names)
    except DepthError:
        return None, "the query is nested too deeply to be written for the database"


_LOCKING = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b|\bLOCK\s+IN\s+SHARE\s+MODE\b",
                      re.IGNORECASE)


def unlocked_sql(sql: str, dialect: str) -> str:
    """``sql`` without its row locks (``FOR UPDATE``, ``FOR SHARE``, ``LOCK IN SHARE MODE``), each
    cut out of the text where sqlglot reads one (the rest as written: sqlglot writes MySQL's
    ``REGEXP`` as ``REGEXP_LIKE``, which MariaDB has not); as it is where it has none or does
    not parse as one query (its error is then the database's).

    >>> unlocked_sql("SELECT name FROM singer FOR SHARE NOWAIT", "postgres")
    'SELECT name FROM singer'
    >>> unlocked_sql("SELECT name FROM singer WHERE name REGEXP '^A' FOR UPDATE", "mysql")
    "SELECT name FROM singer WHERE name REGEXP '^A'"
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rat.errors import deeply

    if not _LOCKING.search(sql):
        return sql
    try:  # (too deeply nested to read, a DepthError: a ValueError)
        trees = [t for t in deeply(sqlglot.parse, sql, dialect) if t is not None]
        locks = len(list(trees[0].find_all(exp.Lock))) if len(trees) == 1 else 0
    except (SqlglotError, ValueError):
        return sql
    if not locks:  # (the words were in a string, or not one query)
        return sql
    # each lock clause's words, with its NOWAIT / SKIP LOCKED / OF tables, in the query's code
    # (not in a string, a quoted name or a comment)
    clause = re.compile(f"(?:{_LOCKING.pattern})" + r"(?:\s+OF\s+[\w.`\"]+(?:\s*,\s*[\w.`\"]+)*)?"
                        r"(?:\s+NOWAIT|\s+SKIP\s+LOCKED|\s+WAIT\s+\d+)?", re.IGNORECASE)
    code = _code_mask(sql, dialect)
    found = list(clause.finditer(code))
    if len(found) != locks:  # (sqlglot and the text disagree: left to the database)
        return sql
    for match in reversed(found):
        sql = sql[:match.start()].rstrip() + sql[match.end():]
    return sql


def _no_code(dialect: str, backslash: bool) -> re.Pattern:
    """What a ``dialect`` database reads as no SQL: a string (its escapes by backslash where
    ``backslash``, PostgreSQL's and DuckDB's ``E'..'`` always; ``''`` in it), a quoted name,
    a dollar-quoted string, a comment. Block comments are read unnested and line comments end at
    any line break: where a database reads more as comment than this, more is read as code (a
    word found there refuses the query), never less. Unclosed: to the end."""
    def quoted(q: str, escapes: bool) -> str:
        body = rf"[^{q}\\]|\\.|{q}{q}" if escapes else rf"[^{q}]|{q}{q}"
        return rf"{q}(?:{body})*(?:{q}|\Z)"

    comments = [r"/\*.*?(?:\*/|\Z)"]
    if dialect == "mysql":  # `--` is a comment only before a space or a control character; `"` is a string
        comments += [r"--[\x00-\x20][^\r\n]*", r"#[^\r\n]*"]
        quotes = [quoted("'", backslash), quoted('"', backslash), quoted("`", False)]
    else:
        comments += [r"--[^\r\n]*"]
        quotes = [r"(?<!\w)[eE]" + quoted("'", True), quoted("'", backslash), quoted('"', False),
                  r"(?<![\w$])\$([A-Za-z_]\w*|)\$.*?(?:\$\1\$|\Z)"]
    return re.compile("|".join(comments + quotes), re.DOTALL)


# each dialect's and escaping's pattern of what is no code: `_code_mask`, databases.code_readings
NO_CODE = {(d, b): _no_code(d, b) for d in ("mysql", "postgres") for b in (False, True)}


def _code_mask(sql: str, dialect: str) -> str:
    """``sql`` with each string, quoted name and comment blanked to spaces of its length (the
    positions kept), as ``model.data.databases.code_readings`` reads a query's code: with
    backslash escapes in MySQL's strings (``'it\\'s'``, as MySQL and sqlglot read it), without in
    PostgreSQL's plain ones (its ``standard_conforming_strings``).

    >>> _code_mask("SELECT 'it\\\\'s' FOR UPDATE", "mysql")
    'SELECT         FOR UPDATE'
    """
    pattern = NO_CODE[("mysql", True) if dialect == "mysql" else ("postgres", False)]
    return pattern.sub(lambda m: " " * len(m.group(0)), sql)


# The error of a query runnable_sql cannot write for its database (it is not run)
NOT_WRITTEN = "not in the database's SQL"


def not_written(dialect: str, backend: str, sql: str | None = None, schema=None, table_names=None) -> str:
    """Why a query of ``dialect`` is not run on a ``backend`` database: ``runnable_sql`` gave None
    (given ``sql``, with ``runnable_sql``'s own arguments: what it cannot write, where it knows).

    >>> not_written("duckdb", "sqlite")
    "not in the database's SQL: this duckdb SQL cannot be written for sqlite as it means"
    >>> not_written("sqlite", "mysql", "SELECT total(age) FROM singer")
    "not in the database's SQL: total() is not in mysql's SQL (SQLite's function)"
    """
    why = _written(sql, dialect, backend, schema, table_names)[1] if sql is not None and dialect != backend else None
    return f"{NOT_WRITTEN}: {why or f'this {dialect} SQL cannot be written for {backend} as it means'}"


@functools.lru_cache(maxsize=4096)
def _transpiled(sql: str, dialect: str, backend: str, schema, table_names) -> tuple[str | None, str | None]:
    """(``sql`` written for ``backend``, None), or (None, why it is not where that is known)."""
    import sqlglot
    from sqlglot.errors import ErrorLevel, SqlglotError, UnsupportedError

    import rat
    from model.data.transpile import Spelling, from_sqlite
    from rat.errors import DepthError

    names = table_names if isinstance(table_names, Spelling) else dict(table_names) if table_names else None
    try:
        if dialect == "sqlite" and backend in _CASE_SENSITIVE_LIKE:
            return _sqlite_likes(sql, backend, schema, names), None
        if dialect == "sqlite":
            return from_sqlite(sql, backend, schema, table_names=names), None
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
        if len(trees) != 1 or not _keeps_its_limit(trees[0], backend):
            return None, None
        written = trees[0].sql(dialect=backend, unsupported_level=ErrorLevel.RAISE)
        rat.to_tree(written, schema, dialect=backend)  # what the backend's SQL cannot say is refused there
    except UnsupportedError as error:  # (a SQLite function the backend has not: named)
        return None, str(error).splitlines()[0][:200]
    except DepthError:  # (rat's, of the written query: `_written` says it is nested too deeply)
        raise
    except (SqlglotError, ValueError):  # ValueError: a dialect sqlglot does not know; rat.RATError
        return None, None
    return written, None


def _unparsable(sql: str, dialect: str) -> bool:
    """Whether ``sql`` is not one query sqlglot reads in ``dialect`` (a prediction that cannot run
    as one, wherever it is sent)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    from rat.canonicalize import quiet_sqlglot
    from rat.errors import DepthError, deeply

    try:
        with quiet_sqlglot():
            trees = [t for t in deeply(sqlglot.parse, sql, dialect) if t is not None]
    except (ParseError, TokenError, DepthError):
        return True
    except ValueError:  # a dialect sqlglot does not know: not told
        return False
    return len(trees) != 1


def _keeps_its_limit(tree, backend: str) -> bool:
    """Whether ``backend`` has the ``WITH TIES`` / ``PERCENT`` of the query's limits (sqlglot drops
    them where it has not: `LIMIT 3` for `FETCH FIRST 3 ROWS WITH TIES`, another query)."""
    from sqlglot import exp

    import rat

    target = rat.DIALECTS.get(backend)
    for limit in tree.find_all(exp.Limit, exp.Fetch):
        options = limit.args.get("limit_options")
        if options is not None and (options.args.get("with_ties") and not (target and target.with_ties)
                                    or options.args.get("percent") and not (target and target.limit_percent)):
            return False
    return True


# Where LIKE tells case apart, SQLite's LIKE (which ignores ASCII case) runs as ILIKE.
_CASE_SENSITIVE_LIKE = frozenset({"postgres", "duckdb", "snowflake"})


def _sqlite_likes(sql: str, backend: str, schema, table_names=None) -> str:
    """``from_sqlite``'s translation, with every LIKE made ILIKE: the same rows as in SQLite.

    >>> _sqlite_likes("SELECT name FROM venues WHERE city NOT LIKE '%lon%'", "postgres", None)
    "SELECT name FROM venues WHERE city NOT ILIKE '%lon%'"
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ErrorLevel

    from model.data.transpile import column_names, sqlite_habits, sqlite_strings

    trees = [t for t in sqlglot.parse(sql, read="sqlite") if t is not None]
    if len(trees) != 1:
        raise ValueError(f"{len(trees)} statements, not one")
    tree = sqlite_strings(trees[0], sql, column_names(schema))
    tree = tree.transform(lambda node: exp.ILike(**node.args) if isinstance(node, exp.Like) else node)
    return sqlite_habits(tree, backend, schema, table_names).sql(dialect=backend,
                                                                 unsupported_level=ErrorLevel.RAISE)


def sqlite_sql(sql: str, dialect: str = "sqlite") -> str | None:
    """``sql`` as a SQLite database runs it: ``runnable_sql(sql, dialect, "sqlite")``.

    >>> sqlite_sql("SELECT TOP 5 name FROM singer", "tsql")
    'SELECT name FROM singer LIMIT 5'
    """
    return runnable_sql(sql, dialect, "sqlite")
