"""Live databases, read-only: PostgreSQL, MySQL / MariaDB, DuckDB and SQLite behind one interface.

``open_database(target)`` takes a SQLAlchemy-style URL (``postgresql://user:pw@host:5432/db``,
``postgresql+psycopg://..``, ``mysql+pymysql://..``, ``mariadb+pymysql://..``,
``duckdb:///path/to.duckdb``, ``sqlite:///path/to.sqlite``), a path (a SQLite or DuckDB file,
told by its header), an open DB-API connection (psycopg, duckdb, sqlite3, pymysql) or an SQLAlchemy
``Engine`` / ``Connection`` (its URL: a connection of its own is opened), and gives a
``Database``: ``execute(sql)`` returns ``(rows, None)`` or ``(None, error)`` as
``model.data.execution.execute_sql`` does, ``schema()`` reads tables, columns, types and keys from
the database itself, ``close()`` (or ``with``) ends it.

Every statement runs under the backend's read-only guarantees, and only a single statement that
reads (``SELECT``, ``WITH``, ``VALUES``, ``TABLE``; DuckDB's ``FROM``) is sent at all:

- PostgreSQL: each statement in its own ``BEGIN READ ONLY`` transaction with a ``statement_timeout``
  (before each FETCH of its cursor, the time left), rolled back after it; the extended query
  protocol (one statement per message); the session also has ``default_transaction_read_only``
  and ``idle_in_transaction_session_timeout``; a server that has not answered a statement by its
  time limit and ``CONNECT_TIMEOUT_S`` has its connection shut (a timeout).
- MySQL / MariaDB: ``START TRANSACTION READ ONLY``, ``max_statement_time`` (MariaDB) or
  ``max_execution_time`` (MySQL), rolled back, a query that ran to its time limit being a
  timeout (MariaDB returns ``BENCHMARK``'s 0 then); one statement per call (no multi-statements
  flag); ``INTO`` anywhere (``OUTFILE``, ``DUMPFILE``, variables) and ``:=`` refused.
- DuckDB: ``read_only=True`` and ``enable_external_access=false`` (no file reads or writes, no
  ATTACH, no extension install), each statement in a ``BEGIN TRANSACTION READ ONLY``
  transaction rolled back (a caller's connection may write), interrupted past the timeout; a
  file or URL rat opens has a working memory of ``DUCKDB_MEMORY_MIB`` (DuckDB's own default is
  80% of the machine's), never spills to disk and runs one thread (a float aggregate is the
  same from run to run); a query past its memory is stopped (a caller's connection keeps its own
  ``memory_limit`` and ``threads``).
- SQLite: as ``model.data.execution`` opens it (``mode=ro``, ``query_only``, an authorizer).

A statement under way in a thread whose work is cancelled (``model.data.execution.cancellable``:
rat-serve's client gone) is stopped within ``_WATCH_POLL_S``, a timeout as a SQLite query's:
PostgreSQL's cancelled, MySQL's ended by ``KILL QUERY``, DuckDB's interrupted (`_stopping`).

Results are read in chunks that `_fetch` sizes (16 rows first, PostgreSQL's 2, then as many as
half the budget left holds at the largest row read) and refused past ``max_rows`` rows or ``max_result_bytes``
bytes of Python objects (reading stops within a chunk past it), and their values normalised to what SQLite returns (``Decimal`` ->
float, dates and times -> ISO text, ``bool`` -> int, ``memoryview`` -> bytes), so that results compare across
backends. SQL written in another dialect than the backend's runs as ``runnable_sql`` writes it.

>>> import sqlite3, tempfile
>>> path = Path(tempfile.mkdtemp()) / "t.sqlite"
>>> with sqlite3.connect(path) as conn: _ = conn.execute("CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT)")
>>> with open_database(f"sqlite:///{path}") as db:
...     db.dialect, db.execute("SELECT count(*) FROM singer"), db.schema("s").tables
('sqlite', ([(0,)], None), {'singer': ('id', 'name')})
>>> mask_password("postgresql://scorer:secret@db.example.com:5432/shop")
'postgresql://scorer:***@db.example.com:5432/shop'
"""

from __future__ import annotations

import configparser
import contextlib
import copy
import datetime
import decimal
import functools
import itertools
import logging
import os
import re
import socket
import sqlite3
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit

import rat
from model.data.execution import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_TIMEOUT_S,
    MAX_ROWS,
    NO_CODE,
    SCHEMA_READ_S,
    ResultTooLarge,
    cancel_event,
    execute_sql,
    not_written,
    result_guard,
    runnable_sql,
    sqlite_problem,
    sqlite_uri,
    unlocked_sql,
)
from model.errors import UsageError

if TYPE_CHECKING:
    from model.data.transpile import Spelling

__all__ = ["Database", "DatabaseError", "connection_kwargs", "database_dialect", "database_label", "is_database_url", "is_duckdb_file",
           "is_sqlite_path", "libpq_parameters", "mask_password", "open_database", "refusal", "schema_from_ddl", "sqlalchemy_url"]

Rows = list[tuple[Any, ...]]

# URL scheme (before any +driver) -> backend
SCHEMES = {"postgresql": "postgres", "postgres": "postgres", "mysql": "mysql", "mariadb": "mysql",
           "duckdb": "duckdb", "sqlite": "sqlite"}
EXTRAS = {"postgres": ("psycopg", "postgres"), "mysql": ("pymysql", "mysql"),
          "duckdb": ("duckdb", "duckdb")}
# Seconds to connect; a MySQL server's answer is waited for this long (past a statement's own
# time limit, by which the server ends it): a server that accepts and never answers is let go
CONNECT_TIMEOUT_S = 10
DUCKDB_MEMORY_MIB = 1024  # the working memory of a DuckDB database rat opens (its memory_limit)
# The rows a result's first fetch asks for, their size unknown (then `_fetch` sizes each next one)
_FIRST_ROWS = 16


def _not_pipeline_end(record: logging.LogRecord) -> bool:
    """psycopg logs "error ignored terminating <Pipeline>" for every failed pipelined query,
    whose error the caller already has; that line alone is dropped."""
    return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_not_pipeline_end)
_log = logging.getLogger(__name__)
# The statements sent at all: reads. Anything else (SET, COPY, ATTACH, DDL, DML...) is refused
# before it reaches the database, whatever the role may do.
_READ_WORDS = {"select", "with", "values", "table"}
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")
# MySQL / MariaDB run what is inside /*! ... */ and /*M! ... */ as SQL: never sent
_MYSQL_EXECUTABLE = re.compile(r"/\*M?!")

# Functions refused by name, and why: their effect outlives the read-only transaction a query
# runs in (a session lock, released by no ROLLBACK; a sequence's next value, never rolled back),
# they end a session (the scorer's own, which would end a whole run, or another's), or they run
# SQL on a connection of their own (dblink's, which may write and outlives the query)
_REFUSED_FUNCTIONS = {
    "has an effect that outlives the query": ("pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock",
                                              "pg_try_advisory_lock_shared", "get_lock", "nextval", "setval"),
    "ends a session": ("pg_terminate_backend", "pg_cancel_backend"),
    # (the dblink extension's: another session, outside the read-only transaction, which may write)
    "runs SQL on another connection": ("dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_open",
                                       "dblink_fetch", "dblink_send_query", "dblink_get_result",
                                       "dblink_disconnect", "dblink_close", "dblink_cancel_query"),
}
_WHY_REFUSED = {n: why for why, names in _REFUSED_FUNCTIONS.items() for n in names}
# PostgreSQL's U&"d\0061ta": a name spelled with escapes, which can spell any function's
_ESCAPED_NAME = re.compile(r"\bU&\"", re.IGNORECASE)
_INTO = re.compile(r"\binto\b", re.IGNORECASE)
# MySQL's INTO anywhere: a file (OUTFILE, DUMPFILE) or variables, written (its code only)
_MYSQL_INTO = re.compile(r"\binto\b(?:\s+(outfile|dumpfile)\b)?", re.IGNORECASE)


def code_readings(sql: str, dialect: str) -> list[str]:
    """``sql`` as the database reads its code: each string and quoted name as ``''``, each
    comment as a space; once with backslash escapes in plain strings and once without (MySQL's
    ``NO_BACKSLASH_ESCAPES``, PostgreSQL's ``standard_conforming_strings``: a server's setting),
    a word in either being in the query.

    >>> code_readings("SELECT '#', a -- x\\nFROM t # c", "mysql")[0], code_readings("SELECT 1--1 # c", "mysql")[0]
    ("SELECT '', a  \\nFROM t  ", 'SELECT 1--1  ')
    """
    return [NO_CODE["mysql" if dialect == "mysql" else "postgres", backslash].sub(
        lambda m: " " if m.group(0)[:1] in "/-#" else "''", sql) for backslash in (False, True)]


class DatabaseError(UsageError):
    """A database that cannot be opened or read: one line naming it, the password masked."""


class ConnectionLost(Exception):
    """A backend's connection broke while running a statement (``connecting``: it could not be
    made again)."""

    def __init__(self, message: str, connecting: bool = False):
        super().__init__(message)
        self.connecting = connecting


# What comes before a URL's user: spaces, rat-serve's ``NAME=``, and its scheme with its
# separator, ``://`` or, after a known scheme, a mistyped one (``postgresql:/``, ``postgresql//``,
# ``postgresql:``)
_SCHEME = rf"\s*(?:[a-zA-Z][\w+.-]*://|(?:{'|'.join(SCHEMES)})(?:\+\w+)?(?::/?|//))"
_URL_START = re.compile(rf"\s*(?:[\w.-]+=)?(?:{_SCHEME})?", re.IGNORECASE)


def _credentials(url: str, last_at: int) -> tuple[int, str, str | None, int]:
    """Where ``url``'s user starts, the user, the password (None: none) and where its host starts,
    the user and password being what lies between its scheme (`_URL_START`) and the ``@`` at
    ``last_at`` (a password may hold an unencoded ``@``, ``/`` or ``:``; -1: no user)."""
    start = _URL_START.match(url).end()
    if last_at < start:
        return start, "", None, start
    user, colon, password = url[start:last_at].partition(":")
    return start, user, password if colon else None, last_at + 1


# libpq's connection string, ``host=db port=5432 dbname=shop user=scorer password=..``: a
# PostgreSQL target, read as its URL would be (a value quoted '..' with \\-escapes, or up to a space)
_LIBPQ_VALUE = r"(?:'(?:[^'\\]|\\.)*'|[^\s']*)"
_LIBPQ_STRING = re.compile(rf"\s*(?:\w+\s*=\s*{_LIBPQ_VALUE}(?:\s+|\Z))+")
_LIBPQ_SERVER = {"host", "hostaddr", "port", "dbname", "user", "service"}  # one names a server
_LIBPQ_PASSWORD = re.compile(r"(?:^|(?<=[\s=]))(password\s*=\s*)(?:'(?:[^'\\]|\\.)*(?:'|\Z)|\S*)", re.IGNORECASE)


def libpq_parameters(text: object) -> dict[str, str] | None:
    """The keywords (lowercase) and values of libpq's connection string ``text``, or None where
    ``text`` is not one naming a server.

    >>> libpq_parameters("host=db port=5432 dbname=shop password='p w'"), libpq_parameters("a.sqlite")
    ({'host': 'db', 'port': '5432', 'dbname': 'shop', 'password': 'p w'}, None)
    """
    if not isinstance(text, str) or "=" not in text or not _LIBPQ_STRING.fullmatch(text):
        return None
    pairs = {k.lower(): v for k, v in re.findall(rf"(\w+)\s*=\s*({_LIBPQ_VALUE})", text)}
    if not pairs.keys() & _LIBPQ_SERVER:
        return None
    return {k: re.sub(r"\\(.)", r"\1", v[1:-1]) if v[:1] == "'" else v for k, v in pairs.items()}


def mask_password(url: str) -> str:
    """``url`` with its password (if any) as ``***``: whatever follows the user's ``:`` up to the
    last ``@`` (a password may hold an unencoded ``@``, ``/``, ``:`` or ``?``), the URL mistyped
    too (``postgresql:/``, ``postgresql//``, a leading space, no scheme at all), and a
    ``password=`` (``passwd``, ``pwd``) parameter's value; in libpq's connection string
    (``host=db password=..``), its ``password``'s value. Every message naming a database target
    quotes it so (``database_label``).

    >>> mask_password("postgresql://scorer:p@ss@db:5432/shop?sslmode=require")
    'postgresql://scorer:***@db:5432/shop?sslmode=require'
    >>> mask_password("mysql+pymysql://scorer@db/shop?password=secret&charset=utf8mb4")
    'mysql+pymysql://scorer@db/shop?password=***&charset=utf8mb4'
    >>> [mask_password(u) for u in ("postgresql:/u:pw@h/db", "postgresql//u:pw@h/db", " postgresql:u:pw@h/db")]
    ['postgresql:/u:***@h/db', 'postgresql//u:***@h/db', ' postgresql:u:***@h/db']
    """
    url = str(url)
    if "://" not in url and _LIBPQ_PASSWORD.search(url):  # libpq's string (rat-serve's NAME= before it)
        return _LIBPQ_PASSWORD.sub(r"\1***", url)
    start, user, password, host = _credentials(url, url.rfind("@"))
    if password is not None:
        url = f"{url[:start]}{user}:***@{url[host:]}"
    return re.sub(r"([?&](?:password|passwd|pwd)=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


def is_database_url(text: object) -> bool:
    """Whether ``text`` is written as a database URL rather than a path: ``scheme://...``, or a
    known scheme mistyped (``postgresql:/..``, ``postgresql//..``, ``postgresql:..``, spaces
    before it), which opening it says is not a valid URL, its password masked.

    >>> [is_database_url(t) for t in ("postgresql:/u:pw@h/db", " mysql://h/db", "sqlite/a.sqlite", "a.sqlite")]
    [True, True, False, False]

    libpq's connection string (``host=db dbname=shop user=scorer``) is one too: PostgreSQL's.
    """
    return isinstance(text, str) and (re.match(_SCHEME, text, re.IGNORECASE) is not None
                                      or libpq_parameters(text) is not None)


def sqlalchemy_url(target: object) -> str | None:
    """The URL of an SQLAlchemy ``Engine`` or ``Connection`` (password included, the driver
    dropped: the database is opened with rat's own read-only connection), else None.

    >>> from sqlalchemy import create_engine
    >>> sqlalchemy_url(create_engine("sqlite+pysqlite:///shop.sqlite")), sqlalchemy_url("shop.sqlite")
    ('sqlite:///shop.sqlite', None)
    """
    if type(target).__module__.split(".")[0] != "sqlalchemy":
        return None
    url = getattr(getattr(target, "engine", target), "url", None)
    if url is None:
        return None
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=False)


def _file_kind(path: Path) -> str | None:
    """Whose database file ``path`` is by its header: ``"duckdb"`` (``DUCK`` at byte 8),
    ``"sqlite"`` (``SQLite format 3``), or None (neither, missing, a folder, unreadable)."""
    try:
        with path.open("rb") as file:
            header = file.read(16)
    except (OSError, ValueError):
        return None
    return "duckdb" if header[8:12] == b"DUCK" else "sqlite" if header == b"SQLite format 3\x00" else None


def is_duckdb_file(path: str | Path) -> bool:
    """Whether ``path`` names a DuckDB file: its header says so (a DuckDB file named ``shop.db``),
    or, a header of neither DuckDB's nor SQLite's (no file yet: opening it says so), its name
    ends ``.duckdb`` / ``.ddb``; any other path (a SQLite file named ``shop.duckdb`` too) is read
    as a SQLite file."""
    path = Path(path)
    kind = _file_kind(path)
    return kind == "duckdb" if kind else path.suffix.lower() in (".duckdb", ".ddb")


def is_sqlite_path(target: object) -> bool:
    """Whether ``target`` is a path (not a URL, a connection or a DuckDB file): a SQLite file's.

    >>> is_sqlite_path("spider/concert_singer.sqlite"), is_sqlite_path("sqlite:///a.sqlite"), is_sqlite_path("a.duckdb")
    (True, False, False)
    """
    return isinstance(target, (str, Path)) and not is_database_url(str(target)) and not is_duckdb_file(target)


def database_dialect(target: object) -> str:
    """The dialect (a ``rat.DIALECTS`` name) of a database target's SQL, without opening it: a
    URL's scheme (an SQLAlchemy engine's too), a ``.duckdb`` file's, a connection's module; a
    path is SQLite's. An unknown URL scheme is the ``DatabaseError`` opening it would be.

    >>> [database_dialect(t) for t in ("postgresql://u@h/shop", "mysql+pymysql://h/s",
    ...                                "warehouse.duckdb", "spider/concert_singer.sqlite")]
    ['postgres', 'mysql', 'duckdb', 'sqlite']
    """
    if isinstance(target, Database):
        return target.dialect
    target = sqlalchemy_url(target) or target
    if isinstance(target, (str, Path)):
        if is_database_url(str(target)):
            return parse_url(str(target))["backend"]
        return "duckdb" if is_duckdb_file(target) else "sqlite"
    module = type(target).__module__.split(".")[0]
    return {"psycopg": "postgres", "pymysql": "mysql", "duckdb": "duckdb"}.get(module, "sqlite")


def database_label(target: object) -> str:
    """How a database target is named in messages (the password masked)."""
    if isinstance(target, (str, Path)):
        return mask_password(str(target))
    return f"<{type(target).__module__.split('.')[0]} {type(target).__name__}>"


def first_word(sql: str) -> str:
    """The first keyword of ``sql``, after comments, spaces and opening parentheses, lowercased.

    >>> first_word("/* hi */ (SELECT 1)"), first_word("-- x\\n  drop table t")
    ('select', 'drop')
    """
    match = _WORD.match(sql, _LEADING.match(sql).end())
    return match.group(0).lower() if match else ""


@functools.lru_cache(maxsize=1024)
def refusal(sql: str, dialect: str) -> str | None:
    """Why ``sql`` is not sent to a ``dialect`` database (one line, ``refused: ..``), or None: it
    is one statement that reads (a ``WITH`` too: its queries and its statement read), calls no
    function refused by name, writes no ``SELECT .. INTO``; MySQL's has no ``INTO`` anywhere
    (a file, a variable) and no ``:=`` (it sets a user variable). Words are looked for in the
    query's code as the database reads it (``code_readings``: not in its strings, quoted names
    or comments).

    >>> refusal("SELECT * INTO TEMP t FROM orders", "postgres"), refusal("SET ROLE admin", "postgres")
    ('refused: SELECT .. INTO writes a table (or a variable), not a query that reads', 'refused: only a query that reads is run (found SET)')
    >>> refusal("WITH x AS (SELECT 1) DELETE FROM orders", "duckdb")
    'refused: only a query that reads is run (found DELETE after WITH)'
    """
    if not sql.strip().rstrip(";").strip():
        return "empty SQL"
    if dialect == "mysql" and _MYSQL_EXECUTABLE.search(sql):
        return "refused: a /*! ... */ comment, which MySQL runs as SQL"
    allowed = _READ_WORDS | ({"from"} if dialect == "duckdb" else set())
    for code in code_readings(sql, dialect):
        word = first_word(code)
        if word not in allowed:
            return f"refused: only a query that reads is run (found {word.upper() or 'no keyword'})"
        if part := _writing_part(code, allowed):
            return f"refused: only a query that reads is run (found {part})"
        if dialect == "mysql" and (into := _MYSQL_INTO.search(code)):
            return ("refused: INTO OUTFILE / INTO DUMPFILE writes a file" if into.group(1) else
                    "refused: SELECT .. INTO writes a table (or a variable), not a query that reads")
        if dialect == "mysql" and ":=" in code:
            return "refused: := sets a user variable, which outlives the query"
    if dialect == "postgres" and _ESCAPED_NAME.search(sql):
        return 'refused: a U&"..." name (escapes can spell a refused function\'s)'
    if called := _refused_call(sql, dialect):
        return f"refused: {called}() {_WHY_REFUSED[called]}"
    if _INTO.search(sql) and _writes_into(sql, dialect):
        return "refused: SELECT .. INTO writes a table (or a variable), not a query that reads"
    return None


_TOKEN = re.compile(r"\w+|\S")
# What a part of a query in parentheses may not start with (followed by a word or a quoted name:
# not a column of that name): a statement that writes (PostgreSQL's WITH takes one, and DuckDB's query())
_WRITES = {"insert", "update", "delete", "merge", "replace"}


def _writing_part(code: str, allowed: set[str]) -> str | None:
    """What in a query's ``code`` (`code_readings`) is a statement that does not read: a
    ``WITH``'s own statement (the first word after its list of named queries) not in
    ``allowed``, or a part in parentheses that starts with a word of ``_WRITES``; None if none.

    >>> _writing_part("WITH a (x) AS (SELECT 1), b AS ((DELETE FROM t)) SELECT * FROM a", {"select"})
    'DELETE in parentheses'
    >>> _writing_part("(WITH a AS (SELECT 1) UPDATE t SET x = 1)", {"select"})
    'UPDATE after WITH'
    """
    tokens = [token.lower() for token in _TOKEN.findall(code)]
    top = next((k for k, token in enumerate(tokens) if token != "("), 0)
    listing = tokens[top:top + 1] == ["with"]  # in a WITH's list of named queries
    depth = 0
    for k, token in enumerate(tokens):
        after = tokens[k + 1:k + 3] + ["", ""]
        if token == "(":
            depth += 1
            if after[0] in _WRITES and (after[1][:1].isalnum() or after[1][:1] in "_'"):  # ('': a quoted name)
                return f"{after[0].upper()} in parentheses"
        elif token == ")":
            depth -= 1
            if listing and depth == top and after[0] not in (",", "as", "using"):
                listing = False  # the WITH's own statement, after the last named query
                word = next((t for t in tokens[k + 1:] if t != "("), "")
                if word not in allowed:
                    return f"{word.upper() or 'no keyword'} after WITH"
    return None


def _refused_call(sql: str, dialect: str) -> str | None:
    """The first function of ``_REFUSED_FUNCTIONS`` that ``sql`` calls, read from its tokens (as
    sqlglot reads ``dialect``: comments, spaces, quotes and a schema before the name change
    nothing); SQL it cannot tokenize is read as calling any such name it holds."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    words = set(re.findall(r"\w+", sql.lower())) & _WHY_REFUSED.keys()
    if not words:
        return None
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except (SqlglotError, ValueError):
        return min(words)
    for token, after in itertools.pairwise(tokens):
        if after.token_type == TokenType.L_PAREN and token.text.lower() in words:
            return token.text.lower()
    return None


def _writes_into(sql: str, dialect: str) -> bool:
    """Whether ``sql`` is a ``SELECT .. INTO`` (PostgreSQL's makes a table, MySQL's sets
    variables), as sqlglot reads it (its notes on what it cannot read dropped: False then)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rat.canonicalize import quiet_sqlglot
    from rat.errors import deeply

    try:  # (too deeply nested to read: a DepthError, a ValueError)
        with quiet_sqlglot():
            tree = deeply(sqlglot.parse_one, sql, dialect)
    except (SqlglotError, ValueError):
        return False
    return any(select.args.get("into") is not None for select in tree.find_all(exp.Select))


_PLAIN = (int, float, str, type(None))


def _normal(value: Any) -> Any:
    """A value as SQLite would return it (hashable, comparable across backends)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 \
            else float(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    if isinstance(value, (uuid.UUID, datetime.timedelta)):
        return str(value)
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict):
        return repr(value)
    return value


def _normal_rows(rows: Rows) -> Rows:
    if not rows:
        return rows
    first = rows[0]
    if all(type(v) in _PLAIN for v in first) and all(type(v) in _PLAIN for row in rows for v in row):
        return rows if type(first) is tuple else [tuple(r) for r in rows]
    return [tuple(_normal(v) if type(v) not in _PLAIN else v for v in row) for row in rows]


def _fetch(next_chunk, max_rows: int, max_bytes: int, first: int = _FIRST_ROWS) -> tuple[Rows | None, str | None]:
    """Rows from ``next_chunk(n)`` (up to ``n`` rows; fewer: the last) normalised, refused past
    ``max_rows`` rows or ``max_bytes`` bytes (``model.data.execution.result_guard``). A row's size
    is known only once it is read, and one may be as large as the budget: the first chunk asks
    for ``first`` rows (PostgreSQL's libpq holds a whole chunk before its first row is read: it
    asks for two, 16 rows of 50 MB being 800 MB, and a one-row result one fetch), each next for up to eight times as many as the last
    (at least ``_FIRST_ROWS``), as many as half the budget left holds at the largest row read so
    far, at least one; so what the driver holds stays about the budget, and a small result takes
    one or two fetches. An array (a list, whose elements are normalised one by one) past the
    budget left is refused before it is normalised."""
    guard = result_guard(max_rows, max_bytes)
    rows: Rows = []
    asked, used, largest = first, 0, 1
    try:
        while True:
            n = min(asked, max_rows + 1 - len(rows))
            chunk = next_chunk(n)
            if chunk and list in map(type, chunk[0]) and used + sum(
                    sys.getsizeof(v) for row in chunk for v in row if type(v) is list) > max_bytes:
                raise ResultTooLarge(f"result larger than {max_bytes / 2**20:g} MiB "
                                     f"(past it within {len(rows) + len(chunk)} rows)")
            batch = _normal_rows(chunk)
            rows.extend(guard(None, row) for row in batch)
            if len(batch) < n:
                return rows, None
            sizes = [sum(map(sys.getsizeof, row)) for row in batch]
            used, largest = used + sum(sizes), max(largest, *sizes)
            asked = max(1, min(8 * max(asked, _FIRST_ROWS), (max_bytes - used) // (2 * largest)))
    except ResultTooLarge as error:
        return None, str(error)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text


@dataclass(frozen=True)
class _Tables:
    """The tables a database with schemas (PostgreSQL, DuckDB) or a DDL file is read as:
    ``columns`` (table, column, type; a table of another schema than the one its name is read
    from is named ``schema.table``), ``elsewhere`` (lowercase table -> its schema, for a table
    read from a schema off the search path), ``picked`` ((schema, table) pairs:
    `rat.Schema.table_schemas` says which schema each table is read from), ``qualified``
    (lowercase ``schema.table`` -> (schema, table), those of other schemas) and ``read_as``
    (lowercase (schema, table) -> the name it is read as: its keys are named so)."""

    columns: Rows
    elsewhere: dict[str, str]
    picked: set[tuple[str, str]]
    qualified: dict[str, tuple[str, str]]
    read_as: dict[tuple[str, str], str]  # lowercase (schema, table) -> the name it is read as

    def name(self, schema: str, table: str) -> str | None:
        """The name the table ``schema.table`` (any case, as `rat.Schema` reads names) is read as:
        ``table``, or ``schema.table`` for another schema's; None for a table not read."""
        return self.read_as.get((schema.lower(), table.lower()))

    def keys(self, rows: Rows) -> Rows:
        """Key rows of the catalogue, ``(schema, table, column)`` (primary) or ``(schema, table,
        column, referenced schema, referenced table, referenced column)`` (foreign), as rows of
        the tables read: ``(table, column[, referenced table, referenced column])``, each table
        named as it is read; a key of a table not read is dropped.

        >>> tables = _pick_tables([("public", "t", "a", "int"), ("sales", "t", "b", "int")], ["public"])
        >>> tables.keys([("public", "t", "a"), ("sales", "t", "b", "public", "t", "a"), ("x", "t", "c")])
        [('t', 'a'), ('sales.t', 'b', 't', 'a')]
        """
        named = []
        for row in rows:
            table = self.name(row[0], row[1])
            if len(row) == 3 and table is not None:
                named.append((table, row[2]))
            elif len(row) == 6 and table is not None and (parent := self.name(row[3], row[4])) is not None:
                named.append((table, row[2], parent, row[5]))
        return named


def _pick_tables(rows: Rows, search_path: list[str]) -> _Tables:
    """One table for each name, as the database resolves a name written without a schema: the
    first schema of the search path that has it; a name no schema on the path has is read from
    the other schema that has it, the first by name where several do (a query names its schema
    there, and `rat` reads another schema's ``y.u`` as another table, ``y.u``, with its own
    columns: `rat.Schema.table_schemas`).

    >>> rows = [("public", "t", "a", "int"), ("sales", "t", "b", "int"),
    ...         ("sales", "inv", "id", "int"), ("y", "u", "d", "int"), ("x", "u", "c", "int")]
    >>> picked = _pick_tables(rows, ["public"])
    >>> picked.columns
    [('t', 'a', 'int'), ('sales.t', 'b', 'int'), ('inv', 'id', 'int'), ('y.u', 'd', 'int'), ('u', 'c', 'int')]
    >>> picked.elsewhere, picked.qualified
    ({'inv': 'sales', 'u': 'x'}, {'sales.t': ('sales', 't'), 'y.u': ('y', 'u')})
    """
    rank = {schema: k for k, schema in enumerate(search_path)}
    schemas: dict[str, list[str]] = {}
    for schema, table, _, _ in rows:
        found = schemas.setdefault(table.lower(), [])
        if schema not in found:
            found.append(schema)
    chosen: dict[str, str] = {}
    elsewhere: dict[str, str] = {}
    for table, found in schemas.items():
        on_path = sorted((s for s in found if s in rank), key=rank.__getitem__)
        chosen[table] = on_path[0] if on_path else min(found)
        if not on_path:
            elsewhere[table] = chosen[table]
    read_as = {(s.lower(), t.lower()): t if chosen[t.lower()] == s else f"{s}.{t}" for s, t, _, _ in rows}
    columns = [(read_as[s.lower(), t.lower()], c, d) for s, t, c, d in rows]
    qualified = {f"{s}.{t}".lower(): (s, t) for s, t, _, _ in rows if chosen[t.lower()] != s}
    return _Tables(columns, elsewhere, {(s, t) for s, t, _, _ in rows if chosen[t.lower()] == s}, qualified,
                   read_as)


# ----------------------------------------------------------------- stopping a statement under way

# How often the cancel events of the statements under way are looked at, and a stop that left its
# statement running (one that came before the statement began) is tried again
_WATCH_POLL_S = 0.1


class _Watch:
    """A statement under way: ``stop(hung)`` is called once its thread's work is cancelled
    (``cancel``: ``model.data.execution.cancellable``) or ``deadline`` (``time.monotonic()``;
    None: none) has passed (``hung``: the deadline, by which a server has answered)."""

    def __init__(self, stop, deadline: float | None, cancel: threading.Event | None):
        self.stop, self.deadline, self.cancel = stop, deadline, cancel
        self.fired = False  # stop was called: the statement is a timeout, whatever it returned
        self.stopping = False  # stop is running (in a thread of its own)
        self.next_stop = 0.0  # when stop may be called again

    def due(self, now: float) -> bool:
        wanted = self.cancel is not None and self.cancel.is_set() or self.deadline is not None and now >= self.deadline
        return wanted and not self.stopping and now >= self.next_stop


class _Watcher:
    """One thread for the process that stops the statements under way (`_stopping`): it sleeps
    until the next deadline, looking at cancel events every ``_WATCH_POLL_S`` while there are
    any; a stop runs in a short-lived thread of its own (a server that does not answer it holds
    up no other)."""

    def __init__(self):
        self.changed = threading.Condition()
        self.watches: set[_Watch] = set()
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        with self.changed:
            while True:
                now = time.monotonic()
                for watch in self.watches:
                    if watch.due(now):
                        watch.fired = watch.stopping = True
                        threading.Thread(target=self.stop, args=(watch,), daemon=True).start()
                waits = [w.deadline - now for w in self.watches if w.deadline is not None and w.deadline > now]
                if any(w.cancel is not None or w.fired for w in self.watches):
                    waits.append(_WATCH_POLL_S)
                self.changed.wait(min(waits, default=None))

    def stop(self, watch: _Watch) -> None:
        try:
            watch.stop(watch.deadline is not None and time.monotonic() >= watch.deadline)
        except Exception as error:  # noqa: BLE001 - a connection gone meanwhile: the statement ended
            logging.getLogger(__name__).debug("stopping a statement: %s", _one_line(error))
        finally:
            with self.changed:
                watch.stopping, watch.next_stop = False, time.monotonic() + _WATCH_POLL_S
                self.changed.notify_all()


_WATCHER = _Watcher()
os.register_at_fork(after_in_child=_WATCHER.__init__)  # (a forked copy has no watching thread)


@contextlib.contextmanager
def _stopping(stop, deadline: float | None = None) -> Iterator[_Watch]:
    """``with _stopping(stop, deadline) as watch:`` the statement run inside is stopped,
    ``stop(hung)`` called (from another thread; again every ``_WATCH_POLL_S`` while it runs on),
    once this thread's work is cancelled (``model.data.execution.cancellable``: rat-serve's
    client gone) or ``deadline`` passes (``hung`` True); ``watch.fired`` then says it was. No
    stop is under way once the block is left. Without either, nothing is watched.

    >>> import threading
    >>> from model.data.execution import cancellable
    >>> cancel, stopped = threading.Event(), threading.Event()
    >>> with cancellable(cancel), _stopping(lambda hung: stopped.set()) as watch:
    ...     cancel.set()
    ...     stopped.wait(5), watch.fired
    (True, True)
    """
    watch = _Watch(stop, deadline, cancel_event())
    if watch.cancel is None and deadline is None:
        yield watch
        return
    watcher = _WATCHER
    with watcher.changed:
        watcher.watches.add(watch)
        if watcher.thread is None or not watcher.thread.is_alive():
            watcher.thread = threading.Thread(target=watcher.run, name="rat-statement-watcher", daemon=True)
            watcher.thread.start()
        watcher.changed.notify_all()
    try:
        yield watch
    finally:
        with watcher.changed:
            watcher.watches.discard(watch)
            while watch.stopping:  # (it would stop the connection's next statement)
                watcher.changed.wait()


def _shut(fileno: int) -> None:
    """The connection on socket ``fileno`` ended: each read and write of it fails at once (the
    socket shut down; the driver closes its descriptor)."""
    with socket.socket(fileno=os.dup(fileno)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


_TEXT_TYPE = re.compile(r"char|text|enum|\bset\b|json|clob|string", re.IGNORECASE)  # a declared text type


class Database:
    """One database opened read-only (see the module's text). Use ``open_database``."""

    dialect = "sqlite"  # the rat dialect its SQL is written in
    #: a string naming the database's content for the feature cache, or None: not cached (a live
    #: server's data can change at any moment and has no cheap version stamp)
    cache_identity: str | None = None
    _connect = None  # a function that opens the connection again (a connection of our own), or None

    def __init__(self, name: str, timeout_s: float, max_rows: int, max_result_bytes: int):
        self.name = name  # for messages: the password masked
        self.timeout_s, self.max_rows, self.max_result_bytes = timeout_s, max_rows, max_result_bytes
        self._names: dict[str, tuple[str, dict[str, str]]] | None = None
        self._spelled: Spelling | bool | None = None  # `_spelled_names`: False where there is nothing to spell
        self._texts: dict[tuple[str, str], bool] | None = None  # (table, column) -> declared a text type
        self._picked: _Tables | None = None  # the tables read, where the database has schemas
        self._schemas: dict[str, rat.Schema] = {}  # db_id -> the schema read, once per object
        self._lock = threading.Lock()  # one statement at a time on the connection

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        pass

    # -- running SQL

    def execute(self, sql: str, timeout_s: float | None = None,
                max_result_bytes: int | None = None) -> tuple[Rows | None, str | None]:
        """Run one read-only statement: ``(rows, None)`` or ``(None, error)``. A server that went
        away is no failed query: the statement is tried once more on a new connection; a server
        that cannot be reached again, or a caller's connection lost, is a ``DatabaseError`` (so
        that it is never scored as a query that fails). A statement that loses a connection of
        our own twice, while the server answers, ends its own connection: its failure alone."""
        refused = refusal(sql, self.dialect)
        if refused:
            return None, refused
        seconds = self.timeout_s if timeout_s is None else timeout_s
        budget = self.max_result_bytes if max_result_bytes is None else max_result_bytes
        if seconds <= 0:
            return None, f"timeout after {max(seconds, 0):g} s"
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._execute(sql, seconds, budget)
                except ConnectionLost as lost:  # the server, not the query: connected again once
                    if lost.connecting or self._connect is None:
                        raise DatabaseError(f"{self.name}: {lost}") from None
                    if attempt == 2:  # (the next statement connects again)
                        return None, f"{lost}, twice: the query ends its own connection"
                except DatabaseError:  # (a caller's DuckDB connection with a transaction open)
                    raise
                except Exception as error:  # noqa: BLE001 - a failed query is a result, never raised
                    return None, f"{type(error).__name__}: {_one_line(error)}"
        raise AssertionError("unreachable")

    def _execute(self, sql: str, timeout_s: float, max_bytes: int) -> tuple[Rows | None, str | None]:
        raise NotImplementedError

    def run(self, sql: str, dialect: str = "sqlite", schema: rat.Schema | None = None,
            timeout_s: float | None = None, max_result_bytes: int | None = None
            ) -> tuple[Rows | None, str | None]:
        """``execute`` of ``sql`` written in ``dialect`` as ``written`` writes it for this
        backend; ``(None, not_written(..))`` where it cannot be written so."""
        runnable, why = self.written(sql, dialect, schema)
        return (None, why) if runnable is None else self.execute(runnable, timeout_s, max_result_bytes)

    def written(self, sql: str, dialect: str = "sqlite", schema: rat.Schema | None = None
                ) -> tuple[str | None, str | None]:
        """(``sql`` as ``runnable_sql`` writes it for this backend, None), or (None, why it cannot
        be: ``not_written``). A table or column whose name SQLite-written SQL lowercases (PostgreSQL,
        MySQL) is spelt as this database spells it, another schema's table with its schema as spelt
        (`_spelled_names`)."""
        names = self._spelled_names() if dialect != self.dialect and self.dialect in ("postgres", "mysql") else None
        runnable = runnable_sql(sql, dialect, self.dialect, schema, names)
        return (runnable, None) if runnable is not None else (None, not_written(dialect, self.dialect, sql, schema, names))

    def _spelled_names(self) -> Spelling | None:
        """How this database spells its names (`Spelling`), made once; None where every name is
        in lower case and on the search path (nothing to spell)."""
        from model.data.transpile import Spelling

        if self._spelled is None:
            tables = self._spelling()
            qualified = dict(self._picked.qualified) if self._picked else {}
            elsewhere = dict(self._picked.elsewhere) if self._picked else {}
            plain = not qualified and not elsewhere and all(
                table == lower and all(c == k for k, c in columns.items()) for lower, (table, columns) in tables.items())
            self._spelled = False if plain else Spelling(tables, qualified, elsewhere)
        return self._spelled or None

    # -- names, for lookups written here

    def quote(self, name: str) -> str:
        quote_char = "`" if self.dialect == "mysql" else '"'
        return quote_char + name.replace(quote_char, quote_char * 2) + quote_char

    def table_name(self, table: str) -> str:
        """The quoted name of ``table`` (a schema's lowercase name) as the database spells it,
        with its schema where that is not on the search path, or where it is ``schema.table``,
        a table of another schema (PostgreSQL, DuckDB)."""
        if self._picked and table.lower() in self._picked.qualified:
            return ".".join(map(self.quote, self._picked.qualified[table.lower()]))
        spelled = self._spelling().get(table.lower())
        name = self.quote(spelled[0] if spelled else table)
        elsewhere = self._picked.elsewhere.get(table.lower()) if self._picked else None
        return name if elsewhere is None else f"{self.quote(elsewhere)}.{name}"

    def column_name(self, table: str, column: str) -> str:
        spelled = self._spelling().get(table.lower())
        name = spelled[1].get(column.lower(), column) if spelled else column
        return self.quote(name)

    def has_table(self, table: str) -> bool:
        """Whether the database holds ``table`` (any case); True when its catalogue cannot be read."""
        names = self._spelling()
        return not names or table.lower() in names

    def text_type(self) -> str:
        return "CHAR" if self.dialect == "mysql" else "TEXT"

    def is_text(self, table: str, column: str) -> bool:
        """Whether ``table.column`` is declared a text type (CHAR, VARCHAR, TEXT, ENUM, SET, ..); True
        where its type is not known."""
        if self._texts is None:
            try:
                self._texts = {(t.lower(), c.lower()): bool(_TEXT_TYPE.search(declared or ""))
                               for t, c, declared in self._columns()}
            except Exception:  # noqa: BLE001 - not known: read as text
                self._texts = {}
        return self._texts.get((table.lower(), column.lower()), True)

    def same_text(self, left: str, right: str) -> str:
        """SQL that two texts are equal as SQLite's ``=`` finds them, byte for byte: MySQL's
        collations ignore case and trailing spaces ('Anthony ' = 'anthony'), its bytes do not."""
        return f"CAST({left} AS BINARY) = CAST({right} AS BINARY)" if self.dialect == "mysql" else f"{left} = {right}"

    def equals(self, table: str, column: str, written: str, literal: str) -> str:
        """SQL that ``written`` (``table.column`` as ``column_name`` spells it) equals ``literal``
        (in ``literal()``'s syntax) as SQLite's ``=`` finds it: a string and a text column compared
        byte for byte (``same_text``), a number column's ``=`` comparing numbers (MySQL's
        ``32.0 = '32.0'``, as SQLite's affinity reads it)."""
        if literal[:1] == "'" and (self.dialect != "mysql" or self.is_text(table, column)):
            return self.same_text(written, literal)
        return f"{written} = {literal}"

    def literal(self, label: str) -> str:
        """A SQLite literal (a node label: ``'x'``, ``"x"``, a number) in this backend's syntax."""
        if label[:1] in "'\"" and label[-1:] == label[:1] and len(label) >= 2:
            text = label[1:-1].replace(label[0] * 2, label[0])
            if self.dialect == "mysql":
                text = text.replace("\\", "\\\\")
            return "'" + text.replace("'", "''") + "'"
        return label

    def _spelling(self) -> dict[str, tuple[str, dict[str, str]]]:
        if self._names is None:
            names: dict[str, tuple[str, dict[str, str]]] = {}
            try:
                for table, column, _ in self._columns():
                    spelled = names.setdefault(table.lower(), (table, {}))
                    spelled[1].setdefault(column.lower(), column)
            except Exception:  # noqa: BLE001 - names then stay as written
                names = {}
            self._names = names
        return self._names

    # -- schema

    def schema(self, db_id: str = "") -> rat.Schema:
        """Tables, columns (with their declared types), primary and foreign keys, read from the
        database's catalogue (MySQL: its database; PostgreSQL and DuckDB: every schema, one table
        per name as `_pick_tables` picks it), once per ``Database``: open a new one to read a
        schema changed since."""
        if db_id not in self._schemas:
            self._schemas[db_id] = self._read_schema(db_id)
        return self._schemas[db_id]

    def _read_schema(self, db_id: str) -> rat.Schema:
        try:
            columns = self._columns()
            primary = self._primary_keys()
            foreign = self._foreign_keys()
        except DatabaseError:
            raise
        except Exception as error:  # noqa: BLE001 - any driver's error, told in one line
            raise DatabaseError(f"{self.name}: cannot read the schema ({_one_line(error)})") from None
        tables: dict[str, list[str]] = {}
        types = {}
        for table, column, declared in columns:
            tables.setdefault(table, []).append(column)
            types[f"{table}.{column}"] = str(declared or "")
        if (too_large := _schema_too_large(len(tables), len(columns))) is not None:
            raise DatabaseError(f"{self.name}: {too_large}")
        try:  # names rat cannot tell apart (it reads them in lower case): one line
            return rat.Schema(tables, primary_keys=tuple(f"{t}.{c}" for t, c in primary),
                              foreign_keys=tuple((f"{t}.{c}", f"{rt}.{rc}") for t, c, rt, rc in foreign),
                              column_types=types, db_id=db_id, table_schemas=self._table_schemas(tables))
        except ValueError as error:
            raise DatabaseError(f"{self.name}: {error}") from None

    def _table_schemas(self, tables) -> dict[str, str]:
        """Where each table is read from (`rat.Schema.table_schemas`: `rat` keeps a query's
        `archive.orders` apart from the `orders` read): its schema where the database has
        schemas, else nothing (SQLite)."""
        return {t: s for s, t in self._picked.picked} if self._picked else {}

    def _catalogue(self, sql: str) -> Rows:
        with self._lock:
            rows, error = self._execute(sql, max(self.timeout_s, 30.0), DEFAULT_MAX_RESULT_BYTES)
        if error:
            raise DatabaseError(f"{self.name}: cannot read the schema ({error})")
        return rows

    def _columns(self) -> Rows:  # (table, column, declared type), in table then column order
        if self._picked is None:
            self._picked = _pick_tables(_one_spelling(self._all_columns(), self.name), self._search_path())
        return self._picked.columns

    def _all_columns(self) -> Rows:  # (schema, table, column, declared type), where schemas exist
        raise NotImplementedError

    def _search_path(self) -> list[str]:
        raise NotImplementedError

    def _primary_keys(self) -> Rows:  # (table, column)
        raise NotImplementedError

    def _picked_keys(self, rows: Rows) -> Rows:
        """The catalogue's key rows (with schemas) as keys of the tables read (`_Tables.keys`)."""
        if self._picked is None:
            self._columns()
        return self._picked.keys(rows)

    def _foreign_keys(self) -> Rows:  # (table, column, referenced table, referenced column)
        raise NotImplementedError


# ------------------------------------------------------------------------------------- SQLite


class SqliteDatabase(Database):
    """A SQLite file, run by ``model.data.execution.execute_sql`` (its connections kept per thread)."""

    dialect = "sqlite"

    def __init__(self, path: Path, **limits):
        super().__init__(mask_password(str(path)), **limits)  # (a mistyped libpq string: a path)
        self.path = Path(path)
        problem = sqlite_problem(self.path, self.timeout_s)  # missing, a folder, not SQLite
        if problem is not None:
            raise DatabaseError(f"{self.name}: {problem}")
        stat = self.path.stat()
        self.cache_identity = f"{stat.st_size}:{stat.st_mtime_ns}"
        self._catalogue_read: tuple[Rows, Rows, Rows] | None = None  # the catalogue, once read (`_catalogue_rows`)

    def table_name(self, table: str) -> str:
        return self.quote(table)

    def column_name(self, table: str, column: str) -> str:
        return self.quote(column)

    def literal(self, label: str) -> str:
        return label

    def execute(self, sql, timeout_s=None, max_result_bytes=None):
        seconds = self.timeout_s if timeout_s is None else timeout_s
        budget = self.max_result_bytes if max_result_bytes is None else max_result_bytes
        return execute_sql(self.path, sql, seconds, budget, self.max_rows)

    def _catalogue_rows(self) -> tuple[Rows, Rows, Rows]:
        """(columns, primary keys, foreign keys) as `_columns`, `_primary_keys` and `_foreign_keys`
        give them, read once for this object in one walk of the catalogue: every PRAGMA over one
        read-only connection (`sqlite_uri`: ``mode=ro``; not ``execute_sql``'s, whose authorizer
        refuses PRAGMA; a connection parses the whole catalogue again, so that one per PRAGMA
        makes a schema of n tables cost n times n), under one time limit for it all
        (``SCHEMA_READ_S``) and `_schema_too_large`'s caps, checked as it is read."""
        if self._catalogue_read is not None:
            return self._catalogue_read
        deadline = time.monotonic() + max(self.timeout_s, SCHEMA_READ_S)
        try:
            conn = sqlite3.connect(sqlite_uri(self.path), uri=True)
        except sqlite3.Error as error:
            raise DatabaseError(f"{self.name}: cannot read the schema ({_one_line(error)})") from None
        conn.set_progress_handler(lambda: time.monotonic() > deadline, 100)

        def query(sql: str, args: tuple = ()) -> Rows:
            try:
                if time.monotonic() > deadline:
                    raise sqlite3.OperationalError("interrupted")
                return conn.execute(sql, args).fetchall()
            except sqlite3.Error as error:
                if time.monotonic() > deadline:
                    raise DatabaseError(f"{self.name}: its schema was not read within "
                                        f"{max(self.timeout_s, SCHEMA_READ_S):g} s") from None
                raise DatabaseError(f"{self.name}: cannot read the schema ({_one_line(error)})") from None

        try:
            tables = [r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
            columns, primary, keys_of = [], [], {}
            for table in tables:
                info = query("SELECT * FROM pragma_table_info(?)", (table,))
                columns += [(table, r[1], r[2]) for r in info]
                keys_of[table] = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
                primary += [(table, k) for k in keys_of[table]]
                if (too_large := _schema_too_large(len(tables), len(columns))) is not None:
                    raise DatabaseError(f"{self.name}: {too_large}")
            foreign = []
            for table in tables:
                for r in query("SELECT * FROM pragma_foreign_key_list(?)", (table,)):
                    target = r[4]
                    if target is None:  # REFERENCES parent: the parent's primary key
                        if r[2] not in keys_of:  # (a parent of another case, or none)
                            info = query("SELECT * FROM pragma_table_info(?)", (r[2],))
                            keys_of[r[2]] = [k[1] for k in sorted(info, key=lambda k: k[5]) if k[5] > 0]
                        parent = keys_of[r[2]]
                        target = parent[r[1]] if r[1] < len(parent) else r[3]  # (r[1]: its place in the key)
                    foreign.append((table, r[3], r[2], target))
        finally:
            conn.close()
        self._catalogue_read = columns, primary, foreign
        return self._catalogue_read

    def _columns(self) -> Rows:
        return self._catalogue_rows()[0]

    def _primary_keys(self) -> Rows:
        return self._catalogue_rows()[1]

    def _foreign_keys(self) -> Rows:
        return self._catalogue_rows()[2]


# ---------------------------------------------------------------------------------- PostgreSQL


# After each statement on a connection of our own: advisory locks are held by the session, not
# the transaction, so a function that takes one (ours to refuse by name, or a user's own) would
# hold it for as long as the connection lives. A caller's connection keeps its locks.
_UNLOCK = "SELECT pg_advisory_unlock_all()"


_PG_SYSTEM_SCHEMAS = "('pg_catalog', 'information_schema')"


class PostgresDatabase(Database):
    dialect = "postgres"

    def __init__(self, conn, name: str, owned: bool, connect=None, **limits):
        super().__init__(name, **limits)
        self.conn, self.owned, self._connect = conn, owned, connect
        self._autocommit = conn.autocommit
        if not owned:
            from psycopg.pq import TransactionStatus

            if conn.info.transaction_status != TransactionStatus.IDLE:
                raise DatabaseError(f"{name}: the connection has a transaction open; "
                                    "commit or roll it back first")
            conn.autocommit = True  # restored by close()

    def _execute(self, sql, timeout_s, max_bytes):
        """`_read`, and a locking read (``FOR UPDATE``, ``FOR SHARE``) that PostgreSQL ran up to
        its lock read again without it: the read-only transaction (or the scorer's role, which may
        not UPDATE a view) refuses the lock only once the query was found to be one that can
        lock (no aggregate, ``DISTINCT``, ``GROUP BY``, ``UNION``, window), and its rows are the same."""
        started = time.monotonic()
        rows, error = self._read(sql, timeout_s, max_bytes)
        if error and error.startswith(("ReadOnlySqlTransaction: ", "InsufficientPrivilege: ")):
            unlocked = unlocked_sql(sql, "postgres")
            if unlocked != sql:
                return self._read(unlocked, timeout_s - (time.monotonic() - started), max_bytes)
        return rows, error

    def _read(self, sql, timeout_s, max_bytes):
        """The query as a cursor (DECLARE takes one SELECT or VALUES) in a ``BEGIN READ ONLY``
        transaction, its rows fetched in chunks that `_fetch` sizes, each with the time left
        (one round trip: BEGIN, the time limit, DECLARE and the first FETCH pipelined), then
        rolled back (`_end`). Cancelled once its thread's work is (`_stopping`: a timeout); a
        server that has not answered by the time limit and CONNECT_TIMEOUT_S has its connection
        shut (a timeout; the next statement connects again)."""
        import psycopg
        from psycopg.rows import tuple_row

        if self.conn.closed and self._connect is not None:
            try:
                self.conn = self._connect()
            except psycopg.Error as error:
                raise ConnectionLost(f"cannot connect ({_libpq_reason(error)})", connecting=True) from None
        if self.conn.closed:  # a caller's, closed since
            raise ConnectionLost("the connection is closed")
        conn = self.conn
        deadline = time.monotonic() + timeout_s
        head, fetch = conn.cursor(), conn.cursor(row_factory=tuple_row)  # (a caller's may return dicts)
        declared = False

        def next_chunk(n: int) -> Rows:
            nonlocal declared
            milliseconds = max(1, int((deadline - time.monotonic()) * 1000))
            # never prepared: psycopg takes a statement whose PREPARE a failed query in the same
            # pipeline skipped for prepared, and every later query then fails on it
            with conn.pipeline():
                if not declared:
                    head.execute("BEGIN READ ONLY", prepare=False)
                head.execute(f"SET LOCAL statement_timeout = {milliseconds}", prepare=False)
                if not declared:
                    head.execute("DECLARE rat_query NO SCROLL CURSOR FOR " + sql, prepare=False)
                    declared = True
                fetch.execute(f"FETCH FORWARD {n} FROM rat_query", prepare=False)
            rows = fetch.fetchall()
            if time.monotonic() > deadline:  # (rows received and read past the server's time limit)
                raise TimeoutError
            return rows

        def stop(hung: bool) -> None:
            """The statement cancelled; the connection shut where the server does not take the
            cancel (within CONNECT_TIMEOUT_S) or has not ended the statement by its time limit
            and CONNECT_TIMEOUT_S (``hung``: it stopped answering)."""
            if not hung:
                try:
                    conn.cancel_safe(timeout=CONNECT_TIMEOUT_S)
                    return
                except psycopg.Error:
                    pass
            _shut(conn.fileno())

        timeout = None, f"timeout after {timeout_s:g} s"
        with _stopping(stop, deadline + CONNECT_TIMEOUT_S) as watch:
            try:  # (libpq holds a FETCH's rows whole before the first is read: the first asks for two)
                answer = _fetch(next_chunk, self.max_rows, max_bytes, first=2)
            except (psycopg.errors.QueryCanceled, TimeoutError):
                answer = timeout
            except psycopg.Error as error:
                if (conn.broken or conn.closed) and not watch.fired:  # (shut by `stop`: a timeout)
                    raise ConnectionLost(f"connection lost ({_libpq_reason(error)})") from None
                # ("cannot exit pipeline mode while busy": cut off receiving)
                answer = timeout if time.monotonic() > deadline else \
                    (None, f"{type(error).__name__}: {_one_line(error).split(' LINE ')[0]}")
            finally:
                self._end()
        return timeout if watch.fired else answer

    def _end(self) -> None:
        """The statement's transaction rolled back and, on a connection of our own, every session
        lock let go (a function can take one that survives ROLLBACK), in one round trip; a
        connection that cannot do so is closed, and opened again by the next statement."""
        import psycopg
        from psycopg.pq import TransactionStatus

        conn = self.conn
        if conn.closed:
            return
        in_transaction = conn.info.transaction_status != TransactionStatus.IDLE
        try:
            with conn.pipeline():
                if in_transaction:
                    conn.execute("ROLLBACK", prepare=False)
                if self.owned:
                    conn.execute(_UNLOCK, prepare=False)
        except psycopg.Error:
            conn.close()

    def _search_path(self):
        return [schema for schema, in self._catalogue("SELECT unnest(current_schemas(false))")]

    def _all_columns(self):
        # pg_catalog, not information_schema (which lists no materialized view): tables,
        # partitioned tables, views, materialized views and foreign tables, the columns the role
        # may SELECT in schemas it may use; a domain's column has its base type
        return self._catalogue(
            "SELECT n.nspname, c.relname, a.attname, "
            "format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END, NULL) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "JOIN pg_type t ON t.oid = a.atttypid "
            f"WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN {_PG_SYSTEM_SCHEMAS} "
            "AND n.nspname NOT LIKE 'pg\\_%' AND has_schema_privilege(n.oid, 'USAGE') "
            "AND has_column_privilege(c.oid, a.attnum, 'SELECT') ORDER BY c.relname, n.nspname, a.attnum")

    def _primary_keys(self):
        return self._picked_keys(self._catalogue(
            "SELECT n.nspname, cl.relname, a.attname FROM pg_constraint c "
            "JOIN pg_class cl ON cl.oid = c.conrelid JOIN pg_namespace n ON n.oid = cl.relnamespace "
            "CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(col, n) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col "
            "WHERE c.contype = 'p' ORDER BY cl.relname, k.n"))

    def _foreign_keys(self):
        return self._picked_keys(self._catalogue(
            "SELECT n.nspname, cl.relname, a.attname, rn.nspname, rcl.relname, ra.attname "
            "FROM pg_constraint c JOIN pg_class cl ON cl.oid = c.conrelid "
            "JOIN pg_class rcl ON rcl.oid = c.confrelid JOIN pg_namespace n ON n.oid = cl.relnamespace "
            "JOIN pg_namespace rn ON rn.oid = rcl.relnamespace "
            "CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(col, rcol, n) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col "
            "JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = k.rcol "
            "WHERE c.contype = 'f' ORDER BY cl.relname, c.conname, k.n"))

    def close(self) -> None:
        if self.owned:
            self.conn.close()
        elif not self.conn.closed:
            self.conn.autocommit = self._autocommit


def connection_kwargs(url: dict, name: str) -> dict:
    """The driver's connection keywords for a URL ``parse_url`` read, ``name`` (masked) naming
    it in a ``DatabaseError``. PostgreSQL: its parts, then its query parameters as libpq reads
    them (``?sslmode=require``, ``?host=/run/postgresql&port=5433``: they win, as in libpq;
    one libpq does not know is refused by libpq, in one line). MySQL: its parts and
    ``unix_socket``, ``read_default_file`` (a my.cnf: the password off the URL), ``charset``
    and SQLAlchemy's TLS parameters (``ssl_ca``, ``ssl_capath``, ``ssl_cert``, ``ssl_key``,
    ``ssl_cipher``, ``ssl_check_hostname``: pymysql's ``ssl``); another parameter is refused.

    >>> connection_kwargs(parse_url("postgresql://u@h/shop?sslmode=require&port=5433"), "shop")
    {'host': 'h', 'user': 'u', 'dbname': 'shop', 'sslmode': 'require', 'port': '5433', 'connect_timeout': 10}
    """
    if url["backend"] == "postgres":
        kwargs = {k: v for k, v in (("host", url["host"]), ("port", url["port"]), ("user", url["user"]),
                                    ("password", url["password"]), ("dbname", url["database"])) if v}
        kwargs.update(url["query"])
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        return kwargs
    import pymysql

    kwargs = {k: v for k, v in (("host", url["host"]), ("port", url["port"]), ("user", url["user"]),
                                ("password", url["password"]), ("database", url["database"])) if v}
    query = dict(url["query"])
    if "unix_socket" in query:
        kwargs["unix_socket"] = query.pop("unix_socket")
    if "read_default_file" in query:  # a my.cnf [client] section: the password off the URL
        kwargs["read_default_file"] = str(Path(query.pop("read_default_file")).expanduser())
    # TLS in SQLAlchemy's spelling (``?ssl_ca=ca.pem&ssl_cert=..&ssl_key=..``), as pymysql's `ssl`
    tls = {key: query.pop(f"ssl_{key}") for key in ("ca", "capath", "cert", "key", "cipher", "check_hostname")
           if f"ssl_{key}" in query}
    if tls:
        tls.update({k: str(Path(tls[k]).expanduser()) for k in ("ca", "capath", "cert", "key") if k in tls})
        if "check_hostname" in tls:
            tls["check_hostname"] = tls["check_hostname"].lower() not in ("false", "0", "no", "off")
        kwargs["ssl"] = tls
    kwargs.update(charset=query.pop("charset", "utf8mb4"), connect_timeout=CONNECT_TIMEOUT_S, client_flag=0)
    if query:
        raise DatabaseError(f"{name}: unknown URL parameters {sorted(query)}")
    if pymysql.charset.charset_by_name(kwargs["charset"]) is None:
        raise DatabaseError(f"{name}: unknown charset {kwargs['charset']!r}")
    return kwargs


def _open_postgres(url, name: str, limits: dict) -> PostgresDatabase:
    import psycopg

    session_ms = int(limits["timeout_s"] * 1000)
    kwargs = connection_kwargs(url, name)
    kwargs["options"] = (f"{kwargs.get('options', '')} -c default_transaction_read_only=on "
                         f"-c statement_timeout={session_ms} "
                         f"-c idle_in_transaction_session_timeout={max(session_ms, 60_000)}").strip()
    kwargs.setdefault("application_name", "rat-confidence")

    def connect():
        return psycopg.connect(autocommit=True, **kwargs)

    try:
        conn = connect()
    except psycopg.Error as error:
        raise DatabaseError(f"{name}: cannot connect ({_libpq_reason(error)})") from None
    return PostgresDatabase(conn, name, owned=True, connect=connect, **limits)


def _libpq_reason(error: BaseException) -> str:
    """libpq's error in one line: what failed, after the server it names, its hint kept.

    >>> _libpq_reason(Exception('connection failed: connection to server at "h" (1.2.3.4), port 5432 '
    ...                         'failed: Connection refused\\n\\tIs the server running on that host?'))
    'Connection refused; Is the server running on that host?'
    """
    lines = [line.strip() for line in str(error).rpartition(" failed: ")[2].splitlines() if line.strip()]
    return "; ".join(lines).removeprefix("FATAL:").strip() or type(error).__name__


# ------------------------------------------------------------------------------ MySQL / MariaDB


_MYSQL_LOST = (2003, 2006, 2013, 2055)  # can't connect, server gone away, lost during a query


def _mysql_reason(error: BaseException, waited_s: float) -> str:
    """pymysql's error in one line, its message without its code; a socket's timeout (pymysql's
    "Lost connection .. (timed out)") told as the ``waited_s`` seconds the server did not answer in."""
    message = error.args[1] if len(error.args) > 1 else str(error)
    if str(message).endswith("(timed out)"):
        return f"the server did not answer within {waited_s:g} s"
    return _one_line(Exception(message))


class MySQLDatabase(Database):
    dialect = "mysql"

    def __init__(self, conn, name: str, owned: bool, connect=None, **limits):
        super().__init__(name, **limits)
        self.conn, self.owned, self._connect = conn, owned, connect
        if not owned:
            from pymysql.constants import SERVER_STATUS

            if (conn.server_status or 0) & SERVER_STATUS.SERVER_STATUS_IN_TRANS:  # START TRANSACTION would commit it
                raise DatabaseError(f"{name}: the connection has a transaction open; "
                                    "commit or roll it back first")
        self.mariadb = "mariadb" in str(conn.get_server_info()).lower()

    def _execute(self, sql, timeout_s, max_bytes):
        import pymysql

        if not self.conn.open and self._connect is not None:
            try:
                self.conn = self._connect()
            except pymysql.err.Error as error:
                raise ConnectionLost(f"cannot connect ({_mysql_reason(error, CONNECT_TIMEOUT_S)})",
                                     connecting=True) from None
        conn = self.conn
        if not conn.open:
            raise ConnectionLost("connection closed")
        # each read and write on the socket ends past the statement's limit and CONNECT_TIMEOUT_S:
        # a server that stopped answering (pymysql's only setting of it; a caller's gets its own back)
        waits = conn._read_timeout, conn._write_timeout
        conn._read_timeout = conn._write_timeout = timeout_s + CONNECT_TIMEOUT_S
        cursor = conn.cursor(pymysql.cursors.SSCursor)  # unbuffered: rows read as fetched
        finished = False  # True: no rows left unread
        watch = None
        try:
            cursor.execute("START TRANSACTION READ ONLY")
            if self.mariadb:
                statement = f"SET STATEMENT max_statement_time = {max(timeout_s, 0.001):.3f} FOR {sql}"
            else:
                cursor.execute(f"SET SESSION max_execution_time = {max(1, int(timeout_s * 1000))}")
                statement = sql
            started = time.monotonic()
            # stopped once cancelled; a server that has not answered by the limit and
            # CONNECT_TIMEOUT_S (each socket read's own wait restarts with each packet) has its socket shut
            with _stopping(lambda hung: _shut(conn._sock.fileno()) if hung else _kill_query(conn),
                           started + timeout_s + CONNECT_TIMEOUT_S) as watch:
                cursor.execute(statement)
                if cursor.description is None:
                    finished = True
                    return None, "statement returns no result set"
                rows, error = _fetch(cursor.fetchmany, self.max_rows, max_bytes)
            finished = error is None
            # MariaDB stops some work at its time limit, or killed, without an error (BENCHMARK() returns 0)
            if error is None and time.monotonic() - started >= timeout_s or watch.fired:
                return None, f"timeout after {timeout_s:g} s"
            return rows, error
        except pymysql.err.Error as error:
            finished = True  # (the server's error ends its result)
            code = error.args[0] if error.args else None
            if code in (1969, 3024) or watch is not None and watch.fired:  # past max_statement_time /
                return None, f"timeout after {timeout_s:g} s"  # max_execution_time, or stopped
            reason = _mysql_reason(error, conn._read_timeout)
            if code == 2013 and reason.startswith("the server did not answer"):
                # past the statement's limit: a timeout (pymysql closed the connection; the next
                # statement connects again, or finds the server hung: a DatabaseError)
                return None, f"timeout after {timeout_s:g} s"
            if code in _MYSQL_LOST:
                raise ConnectionLost(f"connection lost ({reason})") from None
            return None, f"{type(error).__name__}: {reason}"
        finally:
            self._end(cursor, finished)
            conn._read_timeout, conn._write_timeout = waits

    def _end(self, cursor, finished: bool) -> None:
        """The statement's transaction rolled back. Rows left unread (``finished`` False) are
        dropped with a connection of our own (opened again by the next statement); a caller's
        connection is kept: they are read to their end and dropped (the statement's time limit
        bounds it). A connection of our own that cannot be rolled back is closed."""
        import pymysql

        conn = self.conn
        if not conn.open:
            return
        if finished or not self.owned:
            try:
                cursor.close()  # (reads what is left of the result)
            except pymysql.err.Error:
                pass  # the server's error: the result ends there
            try:
                conn.rollback()
                return
            except pymysql.err.Error:
                if not self.owned or not conn.open:
                    return
        if cursor._result is not None:  # not drained: its rows go with the connection
            cursor._result.unbuffered_active = False
        conn.close()

    def _columns(self):
        # tables and views; not MariaDB's sequences (tables of their state to it), as PostgreSQL's
        return self._catalogue(
            "SELECT c.table_name, c.column_name, c.column_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = DATABASE() AND t.table_type != 'SEQUENCE' ORDER BY c.table_name, c.ordinal_position")

    def _table_schemas(self, tables):  # MySQL's `shop.orders` names a database
        (database,), = self._catalogue("SELECT DATABASE()")
        return dict.fromkeys(tables, database) if database else {}

    def _primary_keys(self):
        return self._catalogue(
            "SELECT table_name, column_name FROM information_schema.key_column_usage "
            "WHERE table_schema = DATABASE() AND constraint_name = 'PRIMARY' "
            "ORDER BY table_name, ordinal_position")

    def _foreign_keys(self):
        return self._catalogue(
            "SELECT table_name, column_name, referenced_table_name, referenced_column_name "
            "FROM information_schema.key_column_usage WHERE table_schema = DATABASE() "
            "AND referenced_table_name IS NOT NULL ORDER BY table_name, constraint_name, ordinal_position")

    def close(self) -> None:
        if self.owned and self.conn.open:
            self.conn.close()


def _kill_query(conn) -> None:
    """The statement MySQL connection ``conn`` is running stopped: ``KILL QUERY`` of its thread,
    sent on a copy of ``conn`` connected anew (its server, user, password and TLS: a role may
    end its own statements), or, where that fails, ``conn``'s socket shut (closed: the next
    statement connects again)."""
    import pymysql

    killer = copy.copy(conn)
    killer._sock = killer._rfile = None  # (pymysql closes them when a connection is collected)
    killer._read_timeout = killer._write_timeout = CONNECT_TIMEOUT_S
    try:
        killer.connect()
        with killer.cursor() as cursor:
            cursor.execute(f"KILL QUERY {int(conn.thread_id())}")
    except pymysql.err.Error:
        _shut(conn._sock.fileno())
    finally:
        killer.close()


def _open_mysql(url, name: str, limits: dict) -> MySQLDatabase:
    import pymysql

    # (the server's greeting and answers to rat's own statements waited for at most CONNECT_TIMEOUT_S)
    kwargs = {**connection_kwargs(url, name), "autocommit": True, "read_timeout": CONNECT_TIMEOUT_S,
              "write_timeout": CONNECT_TIMEOUT_S}

    def connect():
        conn = pymysql.connect(**kwargs)
        with conn.cursor() as cursor:  # AVG of integers to a double's precision, as elsewhere
            cursor.execute("SET SESSION div_precision_increment = 30")
        return conn

    try:
        conn = connect()
    except pymysql.err.Error as error:
        raise DatabaseError(f"{name}: cannot connect ({_mysql_reason(error, CONNECT_TIMEOUT_S)})") from None
    except (ssl.SSLError, FileNotFoundError) as error:  # a TLS file it cannot read
        raise DatabaseError(f"{name}: cannot connect ({_one_line(error)})") from None
    except (configparser.Error, ValueError, OSError, UnicodeError) as error:  # a my.cnf it cannot read
        # (its text is not quoted: configparser's errors hold the file's lines, password and all)
        raise DatabaseError(f"{name}: cannot read read_default_file {kwargs.get('read_default_file')} "
                            f"({type(error).__name__})") from None
    return MySQLDatabase(conn, name, owned=True, connect=connect, **limits)


# -------------------------------------------------------------------------------------- DuckDB


class DuckDBDatabase(Database):
    dialect = "duckdb"

    def __init__(self, conn, name: str, owned: bool, path: Path | None = None, **limits):
        super().__init__(name, **limits)
        self.conn, self.owned = conn, owned
        if path is not None:  # the file and its write-ahead log, whose changes DuckDB reads too
            stats = [path.stat()]
            try:
                stats.append(Path(f"{path}.wal").stat())
            except FileNotFoundError:
                pass
            self.cache_identity = "duckdb:" + ":".join(f"{s.st_size}:{s.st_mtime_ns}" for s in stats)
        if not owned:  # harden a caller's connection: disabling external access cannot be undone
            try:
                self._begin()
            except ConnectionLost as lost:
                raise DatabaseError(f"{name}: {lost}") from None
            conn.execute("ROLLBACK")
            conn.execute("SET enable_external_access = false")
        self.memory_limit = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]

    def _begin(self) -> None:
        """A read-only transaction (a caller's connection may write: a query in it cannot, nor
        can DuckDB's query() run a statement that writes); one open already is a ``DatabaseError``,
        a caller's connection closed since ``ConnectionLost``."""
        import duckdb

        try:
            self.conn.execute("BEGIN TRANSACTION READ ONLY")
        except duckdb.TransactionException:
            raise DatabaseError(f"{self.name}: the connection has a transaction open; "
                                "commit or roll it back first") from None
        except duckdb.ConnectionException:
            raise ConnectionLost("the connection is closed") from None

    def _execute(self, sql, timeout_s, max_bytes):
        """The query in a read-only transaction, rolled back, interrupted past ``timeout_s`` or
        once its thread's work is cancelled (`_stopping`: a timeout); an error of the database
        rather than the query's (`_duckdb_damage`) is a ``DatabaseError``."""
        import duckdb

        if ";" in sql.strip().rstrip(";") and len(self.conn.extract_statements(sql)) != 1:
            return None, "refused: more than one statement"
        self._begin()
        try:
            with _stopping(lambda hung: self.conn.interrupt(), time.monotonic() + timeout_s) as watch:
                cursor = self.conn.execute(sql)
                if cursor.description is None:
                    return None, "statement returns no result set"
                rows, error = _fetch(cursor.fetchmany, self.max_rows, max_bytes)
            return (None, f"timeout after {timeout_s:g} s") if watch.fired else (rows, error)
        except duckdb.InterruptException:
            return None, f"timeout after {timeout_s:g} s"
        except duckdb.OutOfMemoryException:
            return None, f"working memory past {self.memory_limit}"
        except duckdb.Error as error:
            if watch.fired and "interrupt" in str(error).lower():
                return None, f"timeout after {timeout_s:g} s"
            if _duckdb_damage(error):
                raise DatabaseError(f"{self.name}: cannot be read ({_one_line(error)})") from None
            return None, f"{type(error).__name__}: {_one_line(error)}"
        finally:
            self.conn.execute("ROLLBACK")

    def _search_path(self):
        return [schema for schema, in self._catalogue("SELECT current_schema()")]

    def _all_columns(self):
        return self._catalogue(
            "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND NOT internal "
            "ORDER BY table_oid, column_index")

    def _keys(self, kind: str) -> Rows:
        return self._catalogue(
            "SELECT schema_name, table_name, constraint_column_names, referenced_table, "
            f"referenced_column_names FROM duckdb_constraints() WHERE constraint_type = '{kind}' "
            "AND database_name = current_database() ORDER BY table_oid, constraint_index")

    def _primary_keys(self):
        return self._picked_keys([(s, t, c) for s, t, cols, _, _ in self._keys("PRIMARY KEY")
                                  for c in cols])

    def _foreign_keys(self):
        # (DuckDB's foreign keys stay in their schema)
        return self._picked_keys([(s, t, c, s, rt, rc) for s, t, cols, rt, rcols in self._keys("FOREIGN KEY")
                                  for c, rc in zip(cols, rcols or [])])

    def close(self) -> None:
        if self.owned:
            self.conn.close()


def _duckdb_damage(error: BaseException) -> bool:
    """Whether a DuckDB error is the database's, not the query's: its file cannot be read (an I/O
    error: a query reads no other file; a block whose checksum does not match, DuckDB's plain
    ``Error``), or DuckDB invalidated the database after a fatal error."""
    import duckdb

    return isinstance(error, (duckdb.IOException, duckdb.FatalException)) or \
        type(error) is duckdb.Error and str(error).startswith("Corrupt database file")


def _open_duckdb(path: Path, name: str, limits: dict, memory_mib: int) -> DuckDBDatabase:
    import duckdb

    if str(path) != ":memory:" and not path.is_file():
        raise DatabaseError(f"{name}: no such database file")
    if str(path) != ":memory:" and _file_kind(path) == "sqlite":
        raise DatabaseError(f"{name}: a SQLite database file, not DuckDB's (open sqlite:///{path}, or its path)")
    # nothing spilled to disk: it would make a folder `<file>.tmp` beside the user's database;
    # one thread: DuckDB's threads add up a float aggregate's parts in any order, and the same
    # query would give results apart in their last digits from one run to the next
    config = {"enable_external_access": False, "autoinstall_known_extensions": False,
              "autoload_known_extensions": False, "lock_configuration": True,
              "memory_limit": f"{memory_mib}MiB", "temp_directory": "", "threads": 1}
    try:
        conn = duckdb.connect(str(path), read_only=str(path) != ":memory:", config=config)
    except duckdb.Error as error:
        hint = ("; it is open in this process already: pass that connection instead of its path"
                if "different configuration" in str(error) else "")
        raise DatabaseError(f"{name}: cannot open ({_one_line(error)}){hint}") from None
    return DuckDBDatabase(conn, name, owned=True, path=None if str(path) == ":memory:" else path,
                          **limits)


# ------------------------------------------------------------------------------------- opening


def parse_url(url: str) -> dict:
    """The parts of a SQLAlchemy-style URL: backend, driver, user, password, host, port,
    database (a path for SQLite and DuckDB) and query parameters. Spaces around it are dropped;
    a password may hold an unencoded ``@``, ``/`` or ``:`` (the user's part ends at the last
    ``@`` before the query); a URL mistyped (``postgresql:/``) is a ``DatabaseError`` naming it,
    its password masked.

    >>> parse_url("postgresql+psycopg://u:p%40ss@h:5433/shop?sslmode=disable")["password"]
    'p@ss'
    >>> [parse_url("postgresql://u:p@ss/w:rd@h/shop")[k] for k in ("password", "host", "database")]
    ['p@ss/w:rd', 'h', 'shop']
    >>> parse_url("sqlite:////tmp/a.sqlite")["database"], parse_url("duckdb:///a.duckdb")["database"]
    ('/tmp/a.sqlite', 'a.duckdb')
    """
    url = url.strip()
    label = mask_password(url)
    if (libpq := libpq_parameters(url)) is not None:  # libpq's string: its keywords as a URL's parts
        parts = {key: libpq.pop(word, "") for key, word in (("user", "user"), ("password", "password"),
                                                             ("host", "host"), ("database", "dbname"))}
        return {"backend": "postgres", "driver": "", **parts, "port": libpq.pop("port", None), "query": libpq}
    written = re.match(r"([a-zA-Z][\w+.-]*)(://)?", url)
    if written is None or written.group(2) is None:
        raise DatabaseError(f"{label}: not a valid database URL (write "
                            f"{written.group(1).lower() if written else 'scheme'}://user:password@host:port/database)")
    scheme, _, driver = written.group(1).lower().partition("+")
    if scheme not in SCHEMES:
        raise DatabaseError(f"{label}: unknown database URL scheme {written.group(1)!r} "
                            f"(known: {', '.join(sorted(SCHEMES))})")
    backend = SCHEMES[scheme]
    known_drivers = {"postgres": {"", "psycopg", "psycopg2", "psycopg_binary"},
                     "mysql": {"", "pymysql"}, "duckdb": {"", "duckdb_engine"}, "sqlite": {"", "pysqlite"}}
    if driver not in known_drivers[backend]:
        raise DatabaseError(f"{label}: driver {driver!r} is not supported for {scheme} "
                            f"(use {' or '.join(sorted(d for d in known_drivers[backend] if d))})")
    if backend in ("sqlite", "duckdb"):
        path = unquote(url.split("://", 1)[1].split("?", 1)[0])
        path = path.removeprefix("/")
        if not path:
            raise DatabaseError(f"{label}: no database file (write {scheme}:///path/to/file)")
        return {"backend": backend, "driver": driver, "database": path, "query": {}}
    last_at, query_at = url.rfind("@"), url.find("?")
    if 0 <= query_at < last_at and "=" in url[query_at:last_at]:  # the @ is in a parameter's value
        last_at = url.rfind("@", 0, query_at)
    start, user, password, host = _credentials(url, last_at)
    try:
        parts = urlsplit(url[:start] + url[host:])  # the URL without its user and password
    except ValueError:  # an unclosed "[" (IPv6), a host that NFKC changes
        raise DatabaseError(f"{label}: not a valid database URL (its host:port part cannot be read)") from None
    try:
        port = parts.port
    except ValueError:
        raise DatabaseError(f"{label}: the port is not a number (percent-encode a '?' or '#' in the "
                            "password: %3F, %23)") from None
    return {"backend": backend, "driver": driver, "user": unquote(user),
            "password": unquote(password or ""), "host": parts.hostname or "",
            "port": port, "database": unquote(parts.path.lstrip("/")),
            "query": dict(parse_qsl(parts.query))}


def _need(backend: str, name: str) -> None:
    module, extra = EXTRAS[backend]
    try:
        __import__(module)
    except ImportError:
        from model.extras import install_hint

        raise DatabaseError(f"{name}: needs the [{extra}] extra ({module} is not installed): "
                            f"{install_hint(extra)}") from None


def open_database(target, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = MAX_ROWS,
                  max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
                  duckdb_memory_mib: int = DUCKDB_MEMORY_MIB) -> Database:
    """``target`` (a URL, a path, an open connection, an SQLAlchemy engine) as a read-only ``Database``: each
    statement gets at most ``timeout_s`` seconds (unless its call says otherwise), ``max_rows``
    rows and ``max_result_bytes`` (estimated) of result; a DuckDB file or URL a working memory of
    ``duckdb_memory_mib`` (its ``memory_limit``; a PostgreSQL or MySQL server's is its own). ``DatabaseError`` (one line, the
    password masked) when it cannot be opened: no such file, unreachable host, bad credentials,
    unknown database, a driver not installed."""
    limits = {"timeout_s": timeout_s, "max_rows": max_rows, "max_result_bytes": max_result_bytes}
    if isinstance(target, Database):
        return target
    if isinstance(target, (str, Path)):
        name = database_label(target)
        if is_database_url(str(target)):
            url = parse_url(str(target))
            backend = url["backend"]
            if backend == "sqlite":
                return SqliteDatabase(Path(url["database"]), **limits)
            _need(backend, name)
            if backend == "duckdb":
                return _open_duckdb(Path(url["database"]), name, limits, duckdb_memory_mib)
            if not url["database"]:
                raise DatabaseError(f"{name}: no database name (write ...://host:port/database, or dbname=..)")
            return (_open_postgres if backend == "postgres" else _open_mysql)(url, name, limits)
        path = Path(target)
        if is_duckdb_file(path):
            _need("duckdb", name)
            return _open_duckdb(path, name, limits, duckdb_memory_mib)
        return SqliteDatabase(path, **limits)
    if (url := sqlalchemy_url(target)) is not None:
        return open_database(url, **limits)
    module = type(target).__module__.split(".")[0]
    name = database_label(target)
    if module == "psycopg":
        if target.closed:
            raise DatabaseError(f"{name}: the connection is closed")
        info = target.info
        return PostgresDatabase(target, f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}",
                                owned=False, **limits)
    if module == "pymysql":
        return MySQLDatabase(target, f"mysql://{target.user.decode() if isinstance(target.user, bytes) else target.user}"
                             f"@{target.host}:{target.port}/{(target.db or b'').decode() if isinstance(target.db, bytes) else target.db}",
                             owned=False, **limits)
    if module in ("duckdb", "_duckdb"):
        return DuckDBDatabase(target, name, owned=False, **limits)
    if isinstance(target, sqlite3.Connection):
        try:
            cursor = target.cursor()
            cursor.row_factory = None  # rows as tuples, whatever the connection returns
            files = [r[2] for r in cursor.execute("PRAGMA database_list") if r[1] == "main"]
        except sqlite3.Error as error:  # a closed connection
            raise DatabaseError(f"{name}: cannot be read ({_one_line(error)})") from None
        if not files or not files[0]:
            raise DatabaseError(f"{name}: an in-memory SQLite database cannot be opened read-only; "
                                "pass its file")
        return SqliteDatabase(Path(files[0]), **limits)
    raise DatabaseError(f"{name}: not a database URL, path or connection "
                        "(psycopg, pymysql, duckdb, sqlite3, or an SQLAlchemy engine)")


# The most tables and columns a schema read from a database may have (a warehouse of 10,000
# tables of 20 columns is within both): a catalogue past them costs minutes and gigabytes to read
# and score against, and is refused in one line (`_schema_too_large`)
MAX_SCHEMA_TABLES = 10_000
MAX_SCHEMA_COLUMNS = 200_000


def _schema_too_large(tables: int, columns: int) -> str | None:
    """Why a schema of ``tables`` tables and ``columns`` columns is not read, or None."""
    if tables > MAX_SCHEMA_TABLES:
        return f"its schema has {tables} tables, more than the {MAX_SCHEMA_TABLES} rat reads"
    if columns > MAX_SCHEMA_COLUMNS:
        return f"its schema has more than {MAX_SCHEMA_COLUMNS} columns, the most rat reads"
    return None


def _one_spelling(rows: Rows, name: str) -> Rows:
    """The catalogue's (schema, table, column, type) rows with one spelling of each table of a
    schema and of each column of a table, as rat reads names (in lower case): PostgreSQL's
    ``"Orders"`` beside ``orders``, a table's ``"Name"`` beside ``name``. The one in lower case
    is kept (what an unquoted name reads), else the first; one warning names those left out
    (a query reading them is scored as reading what the schema lacks), so that the rest of the
    database is still read.

    >>> _one_spelling([("public", "Users", "id", "int"), ("public", "users", "id", "int"),
    ...                ("public", "t", "Name", "text"), ("public", "t", "name", "text")], "shop")
    [('public', 'users', 'id', 'int'), ('public', 't', 'name', 'text')]
    """
    tables: dict[tuple[str, str], str] = {}  # (schema, lowercase table) -> the spelling kept
    columns: dict[tuple[str, str, str], str] = {}
    for schema, table, column, _ in rows:
        if table == table.lower() or (schema, table.lower()) not in tables:
            tables[schema, table.lower()] = table
        if column == column.lower() or (schema, table, column.lower()) not in columns:
            columns[schema, table, column.lower()] = column
    kept_rows = [r for r in rows if tables[r[0], r[1].lower()] == r[1] and columns[r[0], r[1], r[2].lower()] == r[2]]
    if len(kept_rows) < len(rows):
        left = sorted({f"{s}.{t}" if tables[s, t.lower()] != t else f"{s}.{t}.{c}" for s, t, c, _ in rows
                       if tables[s, t.lower()] != t or columns[s, t, c.lower()] != c})
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        _log.warning("%s: %s%s left out: rat reads names in lower case, and another spelling of each is kept",
                     name, ", ".join(repr(n) for n in left[:5]), more)
    return kept_rows


# ------------------------------------------------------------------------------ DDL schema files


# What is read of a schema's DDL once a dump's rows are dropped (sqlglot parses about a MB a
# second, holding about 100 bytes per byte of DDL): past it, one line asks for the schema only.
MAX_DDL_CHARS = 16 << 20
# The longest statement of DDL read, with the comments before it (a CREATE TABLE of 2,000 columns
# is about 30 KB; sqlglot reads text that is no SQL slowly, again in each dialect a hint tries):
# past it, one line names the file and the statement's line. All statements of a file are read
# within SCHEMA_READ_S (model.data.execution), else one line names where it stopped.
MAX_STATEMENT_CHARS = 256 << 10
# A statement that does not read is tried in other dialects for a hint only up to this length
_HINTED_CHARS = 64 << 10
# A dump's rows: an INSERT statement (MySQL's REPLACE INTO) starting a line, skipped to its end
_ROW_INSERT = re.compile(r"[ \t]*(?:INSERT\b|REPLACE[ \t]+INTO\b)", re.IGNORECASE)
# A line that starts another statement ends an INSERT left without ';' (SQL Server's scripts)
_NEXT_STATEMENT = re.compile(r"[ \t]*(?:(?:CREATE|ALTER|DROP)[ \t]+[A-Za-z]|(?:INSERT|COPY|GRANT|COMMENT)[ \t]|GO\b(?:[ \t]+\d+)?[ \t]*(?:--.*)?\s*$)",
                             re.IGNORECASE)
# SQL Server's batch separator: `GO` alone on its line, or with a count (`GO 2`) or a comment
_GO = re.compile(r"[ \t]*GO(?:[ \t]+\d+)?[ \t]*(?:--.*)?\s*$", re.IGNORECASE)
# The mysql client's `DELIMITER ;;`: what ends a statement from the next line on
_DELIMITER = re.compile(r"[ \t]*DELIMITER[ \t]+(\S+)[ \t]*$", re.IGNORECASE)
# The first line of a MySQL stored program (its body holds `;`), its version comments' marks
# (`_VERSION_MARK`) dropped: mysqldump's triggers, --routines and --events, between DELIMITER ;; and ;
_STORED_PROGRAM = re.compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:DEFINER\s*=\s*(?:`[^`]*`|'[^']*'|[^\s`'@]+)"
                             r"(?:@(?:`[^`]*`|'[^']*'|[^\s`']+))?\s+)?(?:AGGREGATE\s+)?"
                             r"(?:PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE)\b", re.IGNORECASE)
_VERSION_MARK = re.compile(r"/\*!\d{5}|\*/")
# The first line of a SQL Server module (its body holds `;` and may create tables): first in
# its batch, it runs to the next `GO` (or the end of the file), as SQL Server reads it
_TSQL_MODULE = re.compile(r"[ \t]*(?:CREATE[ \t]+(?:OR[ \t]+ALTER[ \t]+)?|ALTER[ \t]+)(?:PROCEDURE|PROC|FUNCTION|TRIGGER)\b",
                          re.IGNORECASE)


def read_ddl_lines(file: TextIO) -> Iterator[str]:
    """The lines of an open DDL file, a line longer than ``MAX_DDL_CHARS`` in pieces (a dump's
    row, or anything else past the limit, is never held whole)."""
    return iter(functools.partial(file.readline, MAX_DDL_CHARS), "")


@functools.cache
def _quoting(dialect: str) -> tuple[re.Pattern, dict[str, re.Pattern]]:
    """How a dump's INSERT is read to its end in ``dialect`` (its quotes as sqlglot's tokenizer
    has them): what comes next outside quotes (a whole string or quoted name, ``;``, or an
    opening quote whose end is on a later line), and the pattern of the rest of a quote left
    open, by its opening character (backslash escapes in the strings of dialects that have them)."""
    from sqlglot.dialects.dialect import Dialect

    tokenizer = Dialect.get_or_raise(dialect).tokenizer_class
    backslash = "\\" in tokenizer.STRING_ESCAPES
    pairs = [(q, q, backslash) for q in tokenizer.QUOTES if isinstance(q, str) and len(q) == 1]
    pairs += [(q, q, False) if isinstance(q, str) else (q[0], q[1], False) for q in tokenizer.IDENTIFIERS
              if len(q[0]) == 1]
    rest = {o: re.compile(rf"[^{re.escape(c)}\\]*+(?:\\.[^{re.escape(c)}\\]*+)*+{re.escape(c)}" if escapes
                          else rf"[^{re.escape(c)}]*+{re.escape(c)}", re.DOTALL) for o, c, escapes in pairs}
    whole = "|".join(re.escape(o) + p.pattern for o, _, _ in pairs for p in [rest[o]])
    return re.compile(rf"{whole}|;|[{re.escape(''.join(rest))}]", re.DOTALL), rest


def _insert_end(line: str, quote: str | None, quoting: tuple[re.Pattern, dict[str, re.Pattern]]) -> tuple[str | None, int]:
    """Where in ``line`` an INSERT ends (past its ``;``; -1: not on this line), and the quote open
    at the end of the line when it does not, ``quote`` being the one open at its start
    (``quoting``: the dialect's, ``_quoting``).

    >>> pg = _quoting("postgres")
    >>> _insert_end("(1, 'a;\\n", None, pg), _insert_end("b'), (2, 'it''s');\\n", "'", pg)
    (("'", -1), (None, 18))
    """
    after, rest = quoting
    start = 0
    if quote is not None:
        closed = rest[quote].match(line)
        if closed is None:
            return quote, -1
        start = closed.end()
    for token in after.finditer(line, start):
        if token.group() == ";":
            return None, token.end()
        if len(token.group()) == 1:  # an opening quote closed on a later line
            return token.group(), -1
    return None, -1


def _declarations(lines: Iterable[str], dialect: str, source: str, file_lines: list[int] | None = None) -> str:
    r"""The text of a DDL file or dump without what is no schema, read in one pass over its lines
    (a file's are not held): a dump's rows (INSERT statements, over as many lines as their values
    take, to their ``;``; the rows of each ``COPY .. FROM stdin;``, up to its ``\.``), psql's
    meta-commands (``\restrict <key>``, pg_dumpall's ``\connect db``); SQL Server's batch
    separator ``GO`` ends a statement; SQL Server's procedures, functions and triggers (a
    line starting ``CREATE [OR ALTER] | ALTER PROCEDURE|PROC|FUNCTION|TRIGGER`` to the next
    ``GO``, or to the end of the file, with a warning: SQL Server reads it all as the body);
    MySQL's stored programs (triggers, routines, events,
    whose bodies hold ``;``: mysqldump writes them between ``DELIMITER ;;`` and ``DELIMITER ;``),
    another statement's delimiter written ``;``. ``UsageError`` naming ``source`` past
    ``MAX_DDL_CHARS`` of what is left. ``file_lines`` (when given) gets the file's line number of
    each line of the text returned (errors name the file's lines, not the text's).

    >>> _declarations(["\\restrict k\n", "CREATE TABLE t (a int);\n", "COPY t (a) FROM stdin;\n", "1\n",
    ...                "\\.\n", "INSERT INTO t VALUES (2, 'a;\n", "b'),\n", "(3, 'c');SELECT 1;"], "postgres", "DDL")
    'CREATE TABLE t (a int);\nSELECT 1;'
    >>> _declarations(["DELIMITER ;;\n", "CREATE PROCEDURE p()\n", "BEGIN SELECT 1; END\n", ";;\n",
    ...                "CREATE TABLE t (a int);;\n", "DELIMITER ;\n"], "mysql", "DDL")
    'CREATE TABLE t (a int);\n'
    """
    try:
        quoting = _quoting(dialect)
    except ValueError as error:  # (an unknown dialect)
        raise UsageError(f"{source}: cannot read it as {dialect} DDL ({error})") from None
    kept: list[str] = []
    size, rows, psql = 0, False, dialect == "postgres"
    inserting, quote, line_start = False, None, True  # in a dump's INSERT; the quote open in it
    delimiter, program = ";", False  # MySQL's DELIMITER; in a stored program, to its end
    module, module_kind = 0, ""  # the line a SQL Server module skipped to the next GO starts on; its first words
    number = 0  # the file's line being read
    for line in lines:  # (a file's lines come in pieces of at most MAX_DDL_CHARS: read_ddl_lines)
        starts, line_start = line_start, line.endswith("\n")
        number += starts
        while line:
            if inserting and not (starts and quote is None and _NEXT_STATEMENT.match(line)):
                quote, end = _insert_end(line, quote, quoting)
                if end < 0:
                    break
                inserting, line, starts = False, line[end:], False
                continue
            inserting = False
            if rows:
                rows = line.rstrip() != "\\."
            elif psql and (line.lstrip().startswith("\\") or line.startswith("COPY ") and line.rstrip().endswith(" stdin;")):
                rows = line.startswith("COPY ")
            elif dialect == "mysql" and starts and (changed := _DELIMITER.match(line)):
                delimiter, program = changed.group(1), False
            elif program or delimiter != ";" and _STORED_PROGRAM.match(_VERSION_MARK.sub(" ", line)):
                program = not line.rstrip().endswith(delimiter)
            elif dialect == "tsql" and not (starts and _GO.match(line)) and (module or starts and _TSQL_MODULE.match(line)):
                if not module:
                    module, module_kind = number, " ".join(_TSQL_MODULE.match(line).group().split()).upper()
            elif _ROW_INSERT.match(line):
                inserting, quote, starts = True, None, False
                continue
            elif line.strip():
                if dialect == "tsql" and _GO.match(line):
                    line, module = ";\n", 0
                if delimiter != ";" and line.rstrip().endswith(delimiter):
                    line = line.rstrip()[:-len(delimiter)] + ";\n"
                size += len(line)
                if size > MAX_DDL_CHARS:
                    raise UsageError(f"{source}: more than {MAX_DDL_CHARS / 2**20:g} MiB of DDL besides a dump's rows: "
                                     "give the schema only (pg_dump --schema-only, mysqldump --no-data)")
                if file_lines is not None and (not kept or kept[-1].endswith("\n")):
                    file_lines.append(number)
                kept.append(line)
            break
    if module:
        _log.warning("%s: line %d: no GO after this %s: the rest of the file is its body, as SQL Server "
                         "reads it (no table after it is read)", source, module, module_kind)
    return "".join(kept)


def _view_outputs(select, columns_of: Mapping[tuple[str, str], list[tuple[str, str]]],
                  schema_of) -> list[tuple[str, str]]:
    """The (name, declared type) of each column a view's SELECT gives: an aliased or plain
    column's name (a column's type where its table was declared), each column of the tables a
    ``*`` or ``t.*`` reads (``columns_of``: lowercase (schema, table) -> its (column, type), those
    declared before the view); an expression without a name gives none."""
    from sqlglot import exp

    sources: dict[str, tuple[str, str]] = {}  # a FROM item's name or alias -> its (schema, table), lowercase
    for item in [select.args["from_"].this] if select.args.get("from_") else []:
        items = [item, *(j.this for j in select.args.get("joins") or [])]
        for source in items:
            if isinstance(source, exp.Table):
                sources[(source.alias_or_name or "").lower()] = (schema_of(source).lower(), source.name.lower())
    out: list[tuple[str, str]] = []
    for projection in select.expressions:
        star = projection if isinstance(projection, exp.Star) else \
            projection.this if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star) else None
        if star is not None:
            qualifier = projection.table.lower() if isinstance(projection, exp.Column) else ""
            for key in ([sources[qualifier]] if qualifier in sources else [] if qualifier else list(sources.values())):
                out.extend(columns_of.get(key, []))
            continue
        output = projection.alias_or_name
        if not output:
            continue
        declared_type = ""
        if isinstance(projection, exp.Column) and projection.table.lower() in sources:
            declared_type = dict(columns_of.get(sources[projection.table.lower()], [])).get(projection.name, "")
        out.append((output, declared_type))
    return out


# pg_dump's `ALTER TABLE [ONLY] parent ATTACH PARTITION child FOR VALUES ..` (sqlglot keeps it a command)
_ATTACH_PARTITION = re.compile(r"\s*TABLE\s+(?:ONLY\s+)?(\S+)\s+ATTACH\s+PARTITION\s+(\S+)", re.IGNORECASE)
# PostgreSQL's `CREATE MATERIALIZED VIEW name AS query [WITH [NO] DATA]` (kept as a command)
_MATERIALIZED_VIEW = re.compile(r"\s*MATERIALIZED\s+VIEW\s+(.*?)(?:\s+WITH\s+(?:NO\s+)?DATA)?\s*;?\s*$",
                                re.IGNORECASE | re.DOTALL)
# MySQL's versioned comment, `/*!50001 text */`: text MySQL runs (from that version on)
_VERSION_COMMENT = re.compile(r"/\*!\d{5} ?(.*?) ?\*/", re.DOTALL)


# Words between CREATE and TABLE that say what kind of table (a second reading drops them)
_TABLE_KINDS = {"OR", "REPLACE", "GLOBAL", "LOCAL", "TEMP", "TEMPORARY", "TRANSIENT", "VOLATILE", "EXTERNAL", "HYBRID",
                "DYNAMIC", "ICEBERG", "EVENT", "UNLOGGED", "MULTISET", "SET", "SNAPSHOT"}
# The words after a table's name that make it of another table's columns, none of its own
_COPIED_TABLE = {"LIKE", "CLONE", "COPY"}
# Column attributes of storage or security that sqlglot cannot read and rat has no use for, dropped
# on a second reading with what follows them: SQL Server's (MASKED WITH (..), ENCRYPTED WITH (..),
# a column's PRIMARY KEY CLUSTERED), Redshift's column DISTKEY / SORTKEY, Databricks' MASK f
_COLUMN_EXTRAS = {"ROWGUIDCOL": "", "SPARSE": "", "FILESTREAM": "", "DISTKEY": "", "SORTKEY": "", "CLUSTERED": "",
                  "NONCLUSTERED": "", "MASKED": "WITH (", "ENCRYPTED": "WITH (", "MASK": "name"}
# The words that start a table constraint (SQLite's need no comma between them; sqlglot's
# tokens of two words too)
_TABLE_CONSTRAINTS = {"CONSTRAINT", "PRIMARY", "PRIMARY KEY", "FOREIGN", "FOREIGN KEY", "UNIQUE", "CHECK"}
# The words after a column's type that start its constraints (SQLite's type is any words before them)
_COLUMN_CONSTRAINTS = _TABLE_CONSTRAINTS | {"NOT", "NULL", "DEFAULT", "COLLATE", "REFERENCES", "GENERATED", "AS",
                                            "AUTOINCREMENT", "ON"}
# The dialects a statement that does not read is tried in, for a hint (`--dialect`); DuckDB's
# only where the statement writes a type of `_DUCKDB_TYPES` (DuckDB reads most PostgreSQL DDL)
_HINT_DIALECTS = ("duckdb", "postgres", "tsql", "mysql", "snowflake", "bigquery", "databricks", "redshift", "oracle")
# Type names DuckDB writes (EXPORT DATABASE's schema.sql) that PostgreSQL has not
_DUCKDB_TYPES = {"DOUBLE", "TINYINT", "BLOB", "HUGEINT", "UHUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT",
                 "STRUCT", "MAP", "UNION", "VARINT", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"}


def _word(token) -> str:
    """A token's word in upper case ('' for a quoted name, a string or a number)."""
    from sqlglot.tokens import TokenType

    return "" if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER) else token.text.upper()


def _writes_duckdb_types(sql: str) -> bool:
    """Whether a statement writes a type of `_DUCKDB_TYPES`: a word of them after a word (where a
    column's type is written, not its name).

    >>> _writes_duckdb_types("CREATE TABLE t(x DOUBLE, tags VARCHAR[])"), _writes_duckdb_types("CREATE TABLE t (map int[])")
    (True, False)
    """
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = Dialect.get_or_raise("duckdb").tokenize(sql)
    except (SqlglotError, ValueError):
        return False
    return any(_word(token) in _DUCKDB_TYPES and _word(before) and before.token_type not in (TokenType.L_PAREN, TokenType.COMMA)
               for before, token in itertools.pairwise(tokens))


def _closing(tokens: list, start: int) -> int:
    """The index of the parenthesis closing the one at ``tokens[start]`` (the last token if none)."""
    from sqlglot.tokens import TokenType

    depth = 0
    for k in range(start, len(tokens)):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[k].token_type, 0)
        if depth == 0:
            return k
    return len(tokens) - 1


def _created_table(tokens: list, sql: str) -> tuple[str, bool, int] | None:
    """The table a ``CREATE [OR REPLACE] [kind ..] TABLE [IF NOT EXISTS] name`` statement's
    tokens declare: its name as written (its parts, with the dots between them, and what is
    written against them: SQL Server's ``#tmp``, a quote the dialect does not have), whether it
    replaces one, the index of the token after the name (the ``(`` opening its columns, where
    they follow it); None for another statement.

    >>> from sqlglot.dialects.dialect import Dialect
    >>> sql = "CREATE TABLE `p.s.t` (a INT)"
    >>> _created_table(Dialect.get_or_raise("snowflake").tokenize(sql), sql)
    ('`p.s.t`', False, 9)
    """
    from sqlglot.tokens import TokenType

    words = [_word(t) for t in tokens]
    k = 1
    while k < len(words) and words[k] in _TABLE_KINDS:
        k += 1
    if words[:1] != ["CREATE"] or words[k:k + 1] != ["TABLE"]:
        return None
    k += 4 if words[k + 1:k + 4] == ["IF", "NOT", "EXISTS"] else 1
    if k >= len(tokens):
        return None
    end = k  # the name's last token (`db.schema.table`)
    while end + 1 < len(tokens) and tokens[end + 1].token_type != TokenType.L_PAREN and (
            TokenType.DOT in (tokens[end].token_type, tokens[end + 1].token_type) or tokens[end + 1].start == tokens[end].end + 1):
        end += 1
    return sql[tokens[k].start:tokens[end].end + 1], "REPLACE" in words[1:k], end + 1


def _without_extras(item: list) -> list:
    """A column definition's tokens without the attributes in ``_COLUMN_EXTRAS`` (CLUSTERED only
    where no column list follows it: a column's own key)."""
    from sqlglot.tokens import TokenType

    kept, k = [], 0
    while k < len(item):
        word, after = _word(item[k]), item[k + 1] if k + 1 < len(item) else None
        extra = _COLUMN_EXTRAS.get(word) if k > 0 else None
        if extra is None or word.endswith("CLUSTERED") and after is not None and after.token_type == TokenType.L_PAREN:
            kept.append(item[k])
            k += 1
        elif extra == "WITH (" and after is not None and _word(after) == "WITH" and k + 2 < len(item):
            k = _closing(item, k + 2) + 1
        elif extra == "name":  # Databricks' MASK f [USING COLUMNS (..)]
            k += 2
            if [_word(t) for t in item[k:k + 2]] == ["USING", "COLUMNS"]:
                k = _closing(item, k + 2) + 1
        else:
            k += 1
    return kept


def _table_reread(tokens: list, sql: str, dialect: str) -> str | None:
    """A CREATE TABLE that sqlglot does not read (or keeps as a command) written again with only
    what rat reads of it: its name, its columns and keys, Hive's ``PARTITIONED BY (..)``; without
    the table's options after its columns (SQL Server's ``ON [PRIMARY] TEXTIMAGE_ON ..``,
    Redshift's ``INTERLEAVED SORTKEY``, ``ENCODE AUTO``, Databricks' ``WITH ROW FILTER``), inline
    indexes, the column attributes of ``_COLUMN_EXTRAS``; SQLite's table constraints without
    commas between them and type names of several words (the last word kept: its affinity).
    None for a statement that declares no table with columns.

    >>> from sqlglot.dialects.dialect import Dialect
    >>> sql = "CREATE HYBRID TABLE t (a INT SPARSE, INDEX ix (a)) ON [PRIMARY]"
    >>> _table_reread(Dialect.get_or_raise("tsql").tokenize(sql), sql, "tsql")
    'CREATE TABLE t (a INT)'
    """
    from sqlglot.tokens import TokenType

    created = _created_table(tokens, sql)
    if created is None or created[2] >= len(tokens) or tokens[created[2]].token_type != TokenType.L_PAREN:
        return None
    name, replace, opening = created
    closing = _closing(tokens, opening)
    items: list[list] = [[]]
    depth = 0
    for token in tokens[opening + 1:closing]:
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth == 0 and token.token_type == TokenType.COMMA:
            items.append([])
        elif depth == 0 and _word(token) in _TABLE_CONSTRAINTS and items[-1] and _word(items[-1][0]) in \
                _TABLE_CONSTRAINTS and any(t.token_type == TokenType.R_PAREN for t in items[-1]):
            # SQLite's `PRIMARY KEY (a) FOREIGN KEY (b) .. ON DELETE CASCADE UNIQUE (c)`, no comma
            # between: a constraint whose columns are closed ends where another starts
            items.append([token])
        else:
            items[-1].append(token)
    written = []
    for item in items:
        if not item or _word(item[0]) == "INDEX":  # an inline index: no column
            continue
        if _word(item[0]) not in _TABLE_CONSTRAINTS:
            item = _without_extras(item)
            end = next((k for k in range(1, len(item)) if item[k].token_type == TokenType.L_PAREN
                        or _word(item[k]) in _COLUMN_CONSTRAINTS or not _word(item[k])), len(item))
            if dialect == "sqlite" and end > 2:  # a type of several words: its last one
                item = [item[0], *item[end - 1:]]
        written.append(" ".join(sql[t.start:t.end + 1] for t in item))
    partitions = next((k for k in range(closing, len(tokens) - 1) if " ".join(_word(tokens[k]).split()) ==
                       "PARTITIONED BY" and tokens[k + 1].token_type == TokenType.L_PAREN), None)
    partitioned = "" if partitions is None else \
        " " + sql[tokens[partitions].start:tokens[_closing(tokens, partitions + 1)].end + 1]
    return f"CREATE {'OR REPLACE ' if replace else ''}TABLE {name} ({', '.join(written)}){partitioned}"


def _ddl_statements(text: str, dialect: str, source: str, file_lines: list[int]) -> list[tuple[Any, int]]:
    """The statements of DDL ``text`` (what `_declarations` keeps) in ``dialect``, each read on
    its own, with its line in the file (``file_lines``: the file's line of each line of
    ``text``), all within ``SCHEMA_READ_S``, none longer than ``MAX_STATEMENT_CHARS`` with the
    comments before it (each a ``UsageError`` naming ``source`` and the line; text without a ``;``
    past that length is refused before sqlglot reads any of it). A CREATE TABLE sqlglot cannot read, or keeps as a command, is read again as
    `_table_reread` writes it; one that still does not read is a ``UsageError`` naming it and
    its line, with the dialect it reads in where another one does (a command: a warning naming
    it, with that dialect too, and it is skipped; one of another table's columns, BigQuery's
    ``CREATE SNAPSHOT TABLE .. CLONE ..``: a warning that it declares no columns)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import ParseError, SqlglotError
    from sqlglot.tokens import TokenType

    from rat.canonicalize import quiet_sqlglot

    deadline = time.monotonic() + SCHEMA_READ_S

    def file_line(line: int) -> int:  # a line of ``text`` -> the file's
        return file_lines[line - 1] if 0 < line <= len(file_lines) else line

    def too_long(start: int) -> UsageError:
        start += len(text[start:start + MAX_STATEMENT_CHARS]) - len(text[start:start + MAX_STATEMENT_CHARS].lstrip())
        return UsageError(f"{source}: line {file_line(text.count(chr(10), 0, start) + 1)}: a statement longer than "
                          f"{MAX_STATEMENT_CHARS >> 10} KiB (with the comments before it), which rat does not "
                          "read: a table's declaration is far shorter")

    for stretch in re.finditer(r"[^;]+", text):  # (no statement is shorter than the text between two `;`)
        if stretch.end() - stretch.start() > MAX_STATEMENT_CHARS:
            raise too_long(stretch.start())
    reader = Dialect.get_or_raise(dialect)
    try:
        tokens = reader.tokenize(text)
    except (SqlglotError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f"{source}: cannot read it as {dialect} DDL ({first})") from None
    chunks: list[list] = [[]]
    starts = [0]  # where each chunk's text starts: past the `;` before it (its comments its own)
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
            starts.append(token.end + 1)
        else:
            chunks[-1].append(token)
    statements, parser = [], reader.parser()
    hinted = ""  # the dialect the last statement that did not read reads in (tried first for the next)
    for chunk, start in zip(chunks, starts):
        if not chunk:
            continue
        line = file_line(chunk[0].line)
        if chunk[-1].end + 1 - start > MAX_STATEMENT_CHARS:
            raise too_long(start)
        if time.monotonic() > deadline:
            raise UsageError(f"{source}: line {line}: its DDL was not read within {SCHEMA_READ_S:g} s "
                             f"({len(statements)} statements read before this line)")
        failure = None
        try:
            with quiet_sqlglot():  # (its notes on statements it keeps as commands: functions, grants)
                statement = parser.parse(chunk, text)[0]
        except (SqlglotError, ValueError) as error:
            statement, failure = None, error
        if failure is None and not (isinstance(statement, exp.Command) and str(statement.this).upper() == "CREATE"):
            statements.append((statement, line))
            continue
        created = _created_table(chunk, text)
        reread = _table_reread(chunk, text, dialect)
        if reread is not None:
            try:
                with quiet_sqlglot():
                    statement = sqlglot.parse_one(reread, read=dialect)
                if isinstance(statement, exp.Create):
                    statements.append((statement, line))
                    continue
            except (SqlglotError, ValueError):
                pass
        if failure is None and created is None:  # a command rat has no use for, or reads itself
            statements.append((statement, line))
            continue
        if created is None and dialect == "mysql" and _word(chunk[0]) == "DO":
            continue  # MySQL's DO declares nothing (mysqldump's DO SETVAL(..) after a MariaDB sequence)
        what = f"table {created[0]}" if created else \
            "the statement " + " ".join(text[t.start:t.end + 1] for t in chunk[:3]) + " .."
        if failure is None and created[2] < len(chunk) and _word(chunk[created[2]]) in _COPIED_TABLE:
            _not_read(source, line, what, "no columns declared")  # (BigQuery's CREATE SNAPSHOT TABLE .. CLONE ..)
            continue
        written = text[chunk[0].start:chunk[-1].end + 1]
        other = _reading_dialect(written, dialect, hinted, deadline) if len(written) <= _HINTED_CHARS else ""
        hint, hinted = (f"; it reads as {other} DDL: --dialect {other}", other) if other else ("", hinted)
        if failure is None:
            _not_read(source, line, what, f"sqlglot cannot read it as {dialect} DDL{hint}")
            continue
        details = failure.errors[0] if isinstance(failure, ParseError) and failure.errors else {}
        reason = re.sub(r"<Token token_type: \S+, text: (.*?), line: .*?>", r"'\1'",  # (a token's repr: its text)
                        details.get("description") or str(failure).splitlines()[0])
        if details.get("highlight"):
            reason += f", near {details['highlight']!r}"
        raise UsageError(f"{source}: line {line}: cannot read {what} as {dialect} DDL ({reason}){hint}")
    return statements


def _warn_ambiguous(rows: Rows, read: _Tables, source: str) -> None:
    """One warning naming the tables of DDL that several schemas declare, none of them the
    default one: a name written without its schema reads the first of them by name
    (`_pick_tables`), which a query meaning another reads as the wrong table."""
    schemas: dict[str, tuple[str, list[str]]] = {}  # lowercase table -> (its name, its schemas)
    for schema, table, _, _ in rows:
        if table.lower() in read.elsewhere:
            found = schemas.setdefault(table.lower(), (table, []))[1]
            if schema not in found:
                found.append(schema)
    named = [(key, table, sorted(found)) for key, (table, found) in schemas.items() if len(found) > 1]
    if not named:
        return
    said = [f"{table} is in {len(found)} schemas ({', '.join(found)}): an unqualified {table} reads "
            f"{read.elsewhere[key]}.{table}" for key, table, found in named[:3]]
    more = f"; and {len(named) - 3} more such names" if len(named) > 3 else ""
    _log.warning("%s: %s%s; qualify %s", source, "; ".join(said), more, "it" if len(named) == 1 else "them")


def _not_read(source: str, line: int, what: str, reason: str) -> None:
    """The warning for a statement of a DDL file that declares a table rat does not read."""
    _log.warning("%s: line %d: %s is not read (%s)", source, line, what, reason)


def _reading_dialect(written: str, dialect: str, first: str = "", deadline: float | None = None) -> str:
    """For a statement ``written`` that does not read as ``dialect`` DDL: the dialect it reads
    in (a CREATE), ``first`` tried first (the one found for the statements before), then
    `_HINT_DIALECTS` ('' where none reads it, or ``deadline``, a ``time.monotonic()``, passed)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rat.canonicalize import quiet_sqlglot

    tried = dict.fromkeys([first, *_HINT_DIALECTS] if first else _HINT_DIALECTS)
    for other in (d for d in tried if d != dialect and (d != "duckdb" or _writes_duckdb_types(written))):
        if deadline is not None and time.monotonic() > deadline:
            return ""
        try:
            with quiet_sqlglot():
                if isinstance(sqlglot.parse_one(written, read=other), exp.Create):
                    return other
        except (SqlglotError, ValueError):
            continue
    return ""


# The schema a table declared without one is in, per dialect (SQLite: none, as its catalogue is
# read; MySQL's and BigQuery's: the database or dataset, unknown from DDL alone)
_HOME_SCHEMA = {"postgres": "public", "duckdb": "main", "tsql": "dbo", "snowflake": "PUBLIC", "redshift": "public",
                "databricks": "default"}


def schema_from_ddl(text: str | Iterable[str], dialect: str = "sqlite", db_id: str = "",
                    source: str = "DDL") -> rat.Schema:
    """The schema ``CREATE TABLE`` statements (written in ``dialect``) declare: tables, columns
    and their types, primary keys (column or table constraints) and foreign keys (``REFERENCES``
    in a column or a ``FOREIGN KEY`` clause; one without columns points at the parent's primary
    key; keys added by ``ALTER TABLE .. ADD [CONSTRAINT ..]``, as pg_dump writes them, and
    MySQL's ``CONSTRAINT .. FOREIGN KEY``, as mysqldump writes them; SQL Server's ``PRIMARY KEY
    CLUSTERED``, and ``GO`` between statements, as SSMS writes them). A view is a table of its
    output columns, without keys, as a catalogue lists it (``_view_outputs``; mysqldump's, in
    version comments, read as MySQL reads them); a PostgreSQL partition (``ALTER TABLE parent ATTACH
    PARTITION child``) has its parent's foreign keys; a materialized view is read as a view. Other statements (indexes,
    functions; MySQL's ``DO``, which sqlglot cannot read: mysqldump's ``DO SETVAL(..)`` of a MariaDB sequence), psql's
    meta-commands (``\\restrict``), MySQL's stored programs (in ``DELIMITER ;;`` blocks), SQL Server's
    procedures, functions and triggers (to the next ``GO``) and a dump's
    rows (``COPY .. FROM stdin``, INSERTs) are skipped (``_declarations``); of a MySQL dump of
    several databases (``mysqldump --databases a b``: ``USE a`` before each one's statements), the
    database named ``db_id`` is read (none: a ``UsageError`` naming them); ``text`` is the DDL or its lines (an open
    file: a whole dump is read line by line, its rows not held). A table declared without a schema is in the dialect's default one
    (PostgreSQL's and Redshift's public, DuckDB's main, SQL Server's dbo, Snowflake's PUBLIC, Databricks' default); each name is read
    as the database resolves it and as its catalogue is read (`_pick_tables`): from the default
    schema, else the first schema by name that has it, the other schemas' tables of that name
    being tables of their own (``archive.invoices``, with their keys); where each table is read
    from goes to `rat.Schema.table_schemas` (Snowflake's ``create schema X`` and ``USE SCHEMA X``
    put the tables after them in X). Each statement is read on its own (`_ddl_statements`: a
    table sqlglot reads only in part is read again without what it cannot read, one left unread
    is named); Hive's ``PARTITIONED BY (c type)`` and ``ALTER TABLE .. ADD [COLUMN]`` declare
    columns, ``CREATE TABLE .. AS SELECT`` has its query's; SQL Server's temporary tables (``#t``,
    ``##t``) are a warning, not tables; a table declared again is the first,
    the last where it is ``OR REPLACE``d. ``UsageError`` naming ``source`` when a statement does
    not parse (its line in the file), two tables would be one to rat (in lower case, without
    their catalog), or no table is declared.

    >>> s = schema_from_ddl('''CREATE TABLE singer (singer_id INT PRIMARY KEY, name VARCHAR(20));
    ... CREATE TABLE concert (id SERIAL, singer_id INT REFERENCES singer, PRIMARY KEY (id));''',
    ...                     "postgres")
    >>> s.tables, s.primary_keys, s.foreign_keys, s.column_types["singer.name"]
    ({'singer': ('singer_id', 'name'), 'concert': ('id', 'singer_id')}, ('singer.singer_id', 'concert.id'), (('concert.singer_id', 'singer.singer_id'),), 'VARCHAR(20)')
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rat.canonicalize import quiet_sqlglot

    file_lines: list[int] = []
    text = _declarations(text.splitlines(keepends=True) if isinstance(text, str) else text, dialect, source,
                         file_lines)
    if dialect == "mysql":  # mysqldump writes views in version comments (`/*!50001 CREATE .. VIEW .. */`)
        text = _VERSION_COMMENT.sub(r"\1", text)
    statements = _ddl_statements(text, dialect, source, file_lines)
    from sqlglot.dialects.dialect import Dialect

    normalized = Dialect.get_or_raise(dialect).normalize_identifier
    type_sql = Dialect.get_or_raise(dialect).generator()  # (one for all columns: a generator each costs)

    def name(node) -> str:
        while isinstance(node, exp.Ordered):
            node = node.this
        return node.name

    home = _HOME_SCHEMA.get(dialect, "")
    current = [home]  # the schema a name without one is in (Snowflake's CREATE SCHEMA, USE SCHEMA)

    def schema_of(node: exp.Table) -> str:
        """The schema a table written ``node`` is declared in: the one written, else the current
        one, the dialect's default (PostgreSQL's public, DuckDB's main, SQL Server's dbo, ...)
        unless a statement before chose another."""
        written = node.text("db") or current[0]
        return home if written.lower() == home.lower() else written

    def identity(node: exp.Table) -> tuple[str, str, str]:
        """The table ``node`` names as the database tells tables apart: its catalog, schema and
        name, each as the dialect folds it (a quoted name keeps its case)."""
        def folded(part) -> str:
            return normalized(exp.Identifier(this=part.name, quoted=part.quoted)).name if part else ""

        return folded(node.args.get("catalog")), schema_of(node).lower(), folded(node.this)

    rows: list[tuple[str, str, str, str]] = []  # (schema, table, column, declared type)
    # lowercase (schema, table) -> (the table as the database tells it apart, its node, its line)
    declared: dict[tuple[str, str], tuple[tuple[str, str, str], exp.Table, int]] = {}
    primary: list[tuple[str, str, str]] = []  # (schema, table, column)
    # (schema, table, column, parent table's schema (None: as its name is read), its name, its
    # column or None: its primary key)
    pending: list[tuple[str, str, str, str | None, str, str | None]] = []

    def parent_of(ref) -> tuple[str | None, str, list[str]]:
        """The table a REFERENCES names: its schema (None: written without one, read as the
        database resolves the name), its name, the columns named."""
        parent, columns = references(ref)
        unqualified = not parent.text("db") and current[0] == home
        return None if unqualified else schema_of(parent), parent.name, columns

    def references(ref) -> tuple[exp.Table, list[str]]:
        parent = ref.this
        if isinstance(parent, exp.Schema):
            return parent.this, [name(e) for e in parent.expressions]
        return parent, []

    def table_constraint(owner: tuple[str, str], item) -> None:
        """A key declared apart from the columns: in CREATE TABLE, or ALTER TABLE .. ADD."""
        if isinstance(item, exp.Constraint):  # CONSTRAINT name PRIMARY KEY (..) / FOREIGN KEY (..)
            if any(isinstance(e, exp.PrimaryKeyColumnConstraint) for e in item.expressions):
                for e in item.expressions:  # SQL Server's PRIMARY KEY CLUSTERED (..)
                    if isinstance(e, exp.ClusteredColumnConstraint | exp.NonClusteredColumnConstraint):
                        primary.extend((*owner, name(c)) for c in e.this)
            for inner in item.expressions:
                table_constraint(owner, inner)
        elif isinstance(item, exp.PrimaryKey):
            primary.extend((*owner, name(e)) for e in item.expressions)
        elif isinstance(item, exp.ForeignKey) and item.args.get("reference") is not None:
            parent_schema, parent, parent_columns = parent_of(item.args["reference"])
            for k, column in enumerate(name(e) for e in item.expressions):
                pending.append((*owner, column, parent_schema, parent,
                                parent_columns[k] if k < len(parent_columns) else None))

    columns_of: dict[tuple[str, str], list[tuple[str, str]]] = {}  # lowercase (schema, table) -> (column, type)

    def add_column(owner: tuple[str, str], column: str, declared_type: str) -> None:
        rows.append((*owner, column, declared_type))
        columns_of.setdefault((owner[0].lower(), owner[1].lower()), []).append((column, declared_type))

    def column_definition(owner: tuple[str, str], item) -> None:
        """A column (in CREATE TABLE, ALTER TABLE .. ADD, Hive's PARTITIONED BY) and its keys."""
        if isinstance(item, exp.Identifier):  # a column named without its type (Snowflake's dynamic table)
            add_column(owner, item.name, "")
            return
        column, kind = item.name, item.args.get("kind")
        if not item.this.quoted and column.upper() == "INDEX" and isinstance(kind, exp.DataType) \
                and kind.this == exp.DataType.Type.USERDEFINED:
            return  # SQL Server's inline `INDEX ix NONCLUSTERED (x)`: no column
        add_column(owner, column, type_sql.generate(kind, copy=False) if kind is not None else "")
        for constraint in item.args.get("constraints") or []:
            inner = constraint.args.get("kind")
            if isinstance(inner, exp.ForeignKey):  # SQL Server's `x INT FOREIGN KEY REFERENCES p(k)`
                inner = inner.args.get("reference")
            if isinstance(inner, exp.PrimaryKeyColumnConstraint):
                primary.append((*owner, column))
            elif isinstance(inner, exp.Reference):
                parent_schema, parent, parent_columns = parent_of(inner)
                pending.append((*owner, column, parent_schema, parent, parent_columns[0] if parent_columns else None))

    def declare(table: exp.Table, statement: exp.Create, line: int) -> tuple[str, str] | None:
        """The (schema, table) ``statement`` declares, None where it is not read: a table
        declared again (the first is read, the last where it replaces it: ``OR REPLACE``);
        ``UsageError`` for two tables rat would read as one (names in lower case, no catalog)."""
        owner = (schema_of(table), table.name)
        key = (owner[0].lower(), owner[1].lower())
        if key in declared:
            first, first_table, first_line = declared[key]
            if first != identity(table):
                raise UsageError(f"{source}: {first_table.sql(dialect=dialect)} (line {first_line}) and "
                                 f"{table.sql(dialect=dialect)} (line {line}) are one table to rat "
                                 "(names in lower case, without their catalog)")
            if not statement.args.get("replace"):
                return None
            rows[:] = [r for r in rows if (r[0].lower(), r[1].lower()) != key]
            primary[:] = [r for r in primary if (r[0].lower(), r[1].lower()) != key]
            pending[:] = [r for r in pending if (r[0].lower(), r[1].lower()) != key]
            columns_of.pop(key, None)
        declared[key] = (identity(table), table, line)
        return owner

    def view(statement: exp.Create, line: int) -> None:
        """A view's columns, as a catalogue lists them beside the tables' (no keys): those it
        names (``CREATE VIEW v (a, b)``), else its query's output names, a ``*`` being the
        columns of the tables (and views) declared before it; a materialized view's too, and a
        table's made by ``CREATE TABLE .. AS SELECT``."""
        target = statement.this
        named = isinstance(target, exp.Schema)
        table = target.this if named else target
        if not isinstance(table, exp.Table):
            return
        if named:
            columns = [(name(e), "") for e in target.expressions]
        else:
            query = statement.expression
            while isinstance(query, exp.SetOperation):  # a UNION's columns are named by its first query
                query = query.this
            columns = _view_outputs(query, columns_of, schema_of) if isinstance(query, exp.Select) else []
        if not columns:
            return
        owner = declare(table, statement, line)
        if owner is not None:
            for column, declared_type in columns:
                add_column(owner, column, declared_type)

    # mysqldump --databases a b: each database's statements after its `USE a`; the one read is db_id's
    databases = list(dict.fromkeys(s.this.name for s, _ in statements if dialect == "mysql" and isinstance(s, exp.Use)
                                   and not s.args.get("kind") and isinstance(s.this, exp.Table)))
    chosen = None if len(databases) < 2 else next((d for d in databases if d == db_id), None) or \
        next((d for d in databases if d.lower() == db_id.lower()), None)
    if len(databases) > 1 and chosen is None:
        raise UsageError(f"{source}: the schemas of {len(databases)} databases ({', '.join(databases)}): "
                         f"name the one to read as its db_id (--db-id {databases[0]})")
    using = None  # the database a statement is in, where there are several
    partitions: list[tuple[str, str, str, str]] = []  # (schema, table, its partition's schema, table)
    for statement, line in statements:
        if chosen is not None and isinstance(statement, exp.Use) and not statement.args.get("kind"):
            using = statement.this.name
            continue
        if using not in (None, chosen):
            continue
        if isinstance(statement, exp.Use) and str(statement.args.get("kind") or "").upper() == "SCHEMA" \
                or dialect == "snowflake" and isinstance(statement, exp.Create) \
                and str(statement.args.get("kind", "")).upper() in ("SCHEMA", "DATABASE"):
            # a name without a schema is in the schema used or, in Snowflake, the one created
            # last (a new database's PUBLIC), as GET_DDL('DATABASE') writes them
            target = statement.this
            if isinstance(target, exp.Table):
                used = target.name if isinstance(statement, exp.Use) else \
                    target.text("db") if str(statement.args["kind"]).upper() == "SCHEMA" else home
                current[0] = used or current[0]
            continue
        materialized = _MATERIALIZED_VIEW.match(statement.expression) \
            if isinstance(statement, exp.Command) and str(statement.this).upper() == "CREATE" \
            and isinstance(statement.expression, str) else None
        if materialized:  # pg_dump's `.. WITH NO DATA`, which sqlglot keeps a command: read as a view
            try:
                with quiet_sqlglot():
                    statement = sqlglot.parse_one("CREATE VIEW " + materialized.group(1), read=dialect)
            except (SqlglotError, ValueError):
                continue
        attached = _ATTACH_PARTITION.match(statement.expression) \
            if isinstance(statement, exp.Command) and str(statement.this).upper() == "ALTER" \
            and isinstance(statement.expression, str) else None
        if attached:  # PostgreSQL's ALTER TABLE parent ATTACH PARTITION child (kept as a command)
            try:
                parent, child = (exp.to_table(attached.group(k), dialect=dialect) for k in (1, 2))
            except (SqlglotError, ValueError):
                continue
            partitions.append((schema_of(parent), parent.name, schema_of(child), child.name))
            continue
        if isinstance(statement, exp.Alter) and isinstance(statement.this, exp.Table):  # pg_dump's keys
            owner = (schema_of(statement.this), statement.this.name)
            if tuple(map(str.lower, owner)) in declared:
                for action in statement.args.get("actions") or []:
                    if isinstance(action, exp.ColumnDef):  # ALTER TABLE .. ADD [COLUMN] c type
                        column_definition(owner, action)
                    for item in action.expressions if isinstance(action, exp.AddConstraint) else ():
                        table_constraint(owner, item)
            continue
        kind = str(statement.args.get("kind", "")).upper() if isinstance(statement, exp.Create) else ""
        target = statement.this
        table = target.this if isinstance(target, exp.Schema) else target
        if kind == "TABLE" and isinstance(table, exp.Table) and isinstance(table.this, exp.Identifier) \
                and (table.this.args.get("temporary") or table.this.args.get("global_")):  # SQL Server's #t, ##t
            _not_read(source, line, f"table {table.sql(dialect=dialect)}", "a temporary table")
            continue
        if kind == "VIEW" or kind == "TABLE" and not isinstance(target, exp.Schema) \
                and isinstance(statement.expression, exp.Query):  # CREATE TABLE .. AS SELECT: its outputs
            view(statement, line)
            continue
        if kind != "TABLE":
            continue
        if not isinstance(target, exp.Schema):  # LIKE, CLONE: no columns of its own
            _not_read(source, line, f"table {target.sql(dialect=dialect)}", "no columns declared")
            continue
        owner = declare(target.this, statement, line)
        if owner is None:
            continue
        properties = statement.args.get("properties")
        partitioned = [p.this.expressions for p in properties.expressions if isinstance(p, exp.PartitionedByProperty)
                       and isinstance(p.this, exp.Schema)] if properties else []
        # Hive's `PARTITIONED BY (ds STRING)` declares columns, after the others (as its catalogue lists them)
        for item in target.expressions + [e for found in partitioned for e in found if isinstance(e, exp.ColumnDef)]:
            if isinstance(item, exp.ColumnDef | exp.Identifier):
                column_definition(owner, item)
            else:
                table_constraint(owner, item)
    if not rows:
        raise UsageError(f"{source}: no CREATE TABLE statement with columns")
    # a partition has its parent's foreign keys (a partition's partition too): from each table
    # with keys down its partitions, each (table, column) once
    children: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for parent_schema, parent, schema, table in partitions:
        children.setdefault((parent_schema.lower(), parent.lower()), []).append((schema, table))
    known = {(s.lower(), t.lower(), c.lower()) for s, t, c, *_ in pending}
    for s, t, c, *reference in list(pending):
        below = list(children.get((s.lower(), t.lower()), ()))
        while below:
            schema, table = below.pop()
            if (schema.lower(), table.lower(), c.lower()) not in known:
                known.add((schema.lower(), table.lower(), c.lower()))
                pending.append((schema, table, c, *reference))
                below.extend(children.get((schema.lower(), table.lower()), ()))
    # one table for each name, as the database would resolve it, as a catalogue is read
    read = _pick_tables(rows, [home])
    _warn_ambiguous(rows, read, source)
    tables: dict[str, list[str]] = {}
    types: dict[str, str] = {}
    for table, column, declared_type in read.columns:
        tables.setdefault(table, []).append(column)
        types[f"{table}.{column}"] = declared_type
    keys_of: dict[tuple[str, str], list[str]] = {}
    for schema, table, column in primary:
        keys_of.setdefault((schema.lower(), table.lower()), []).append(column)
    foreign = []
    for schema, table, column, parent_schema, parent, parent_column in pending:
        # a parent written without its schema: the table its name is read as
        parent_schema = parent_schema if parent_schema is not None else read.elsewhere.get(parent.lower(), home)
        if parent_column is None:  # its primary key
            parent_column = next(iter(keys_of.get((parent_schema.lower(), parent.lower()), [])), None)
            if parent_column is None:
                continue
        foreign.append((schema, table, column, parent_schema, parent, parent_column))
    try:
        return rat.Schema(tables, primary_keys=tuple(f"{t}.{c}" for t, c in read.keys(primary)),
                          foreign_keys=tuple((f"{t}.{c}", f"{pt}.{pc}") for t, c, pt, pc in read.keys(foreign)),
                          column_types=types, db_id=db_id,
                          table_schemas={t: s for s, t in read.picked if s})
    except ValueError as error:  # names rat reads as one (in lower case)
        raise UsageError(f"{source}: {error}") from None
