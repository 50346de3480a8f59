"""Copy a SQLite database (a Spider database, say) into PostgreSQL, DuckDB or MySQL/MariaDB:
its tables, with column types mapped from the declared SQLite types, primary keys, the foreign
keys the target accepts, and every row.

    python -m model.data.copy_database SQLITE_FILE_OR_FOLDER... URL [--name NAME] [--grant ROLE]

URL names the target server (SQLAlchemy spelling): ``postgresql://user:pw@host:port/db``,
``mysql+pymysql://user:pw@host:port/db`` (MariaDB too) or ``duckdb:///file.duckdb``; its query
parameters go to the driver as ``model.data.databases.connection_kwargs`` passes them (libpq's
``sslmode``, ``host=/socket/folder&port=``; MySQL's ``unix_socket``, ``read_default_file``,
``charset``), one it does not know refused in one line. The copy goes
into the database called NAME (default: the SQLite file's name, Spider's db_id) on that server,
created when missing; for DuckDB into the URL's file, or ``<folder>/<NAME>.duckdb`` when the URL
names a folder. The copied tables are dropped and recreated first, so a second copy replaces the
first. Names are lowercased (an unquoted name in PostgreSQL is lowercase) and always quoted.
A folder argument copies every ``*/*.sqlite`` below it (Spider's ``database/``), one line each.

SQLite stores any value in any column; Spider's data is dirty. What the copy changes is counted
and reported, and no row is lost:

- a column whose values do not fit its declared type becomes TEXT (a REAL value in an INTEGER
  column makes it DOUBLE), except that empty strings in a numeric column become NULL;
- a TEXT column whose every value is an integer's text (Spider's years and ids: ``year =
  2014`` finds '2014' in SQLite, which makes the number text first) becomes BIGINT, so that the
  copy answers such SQL as SQLite does (``--declared-types``: it stays TEXT); other dates, which
  SQLite keeps as text, stay text; BLOBs stay binary;
- a primary key whose values repeat or hold NULL is left out, and so is a foreign key that
  names a missing table or column, references no primary key, or has values with no parent row
  (whatever the target refuses; DuckDB takes foreign keys only to primary keys, in CREATE TABLE).
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from model.data.databases import connection_kwargs, mask_password, parse_url
from model.data.execution import sqlite_uri
from model.errors import UsageError, say_error

__all__ = ["CopyReport", "Target", "copy_database", "main", "target"]

_BATCH = 500
_INT64 = (-(2**63), 2**63 - 1)
_TYPES = {  # kind -> target type name
    "postgres": {"int": "BIGINT", "real": "DOUBLE PRECISION", "text": "TEXT", "blob": "BYTEA"},
    "duckdb": {"int": "BIGINT", "real": "DOUBLE", "text": "VARCHAR", "blob": "BLOB"},
    "mysql": {"int": "BIGINT", "real": "DOUBLE", "text": "LONGTEXT", "blob": "LONGBLOB"},
}


@dataclass(frozen=True)
class Target:
    """Where a copy goes: ``kind`` (postgres, mysql, duckdb) and the parts of its URL."""

    kind: str
    url: str
    host: str = ""
    port: int | None = None
    user: str = ""
    password: str = ""
    database: str = ""
    path: Path | None = None  # DuckDB

    def url_of(self, name: str) -> str:
        """The URL of the copy called ``name`` (same server and credentials)."""
        if self.kind == "duckdb":
            return "duckdb:///" + str(self.file(name))
        return re.sub(r"/[^/?]*(\?.*)?$", "/" + name + r"\1", self.url, count=1)

    def file(self, name: str) -> Path:
        assert self.path is not None
        return self.path / f"{name}.duckdb" if self.path.is_dir() or self.url.endswith("/") \
            else self.path


def target(url: str) -> Target:
    """The `Target` a URL names; another scheme is a UsageError.

    >>> target("postgresql+psycopg://me:pw@db.local:5433/shop").url_of("pets_1")
    'postgresql+psycopg://me:pw@db.local:5433/pets_1'
    >>> target("duckdb:////tmp/x.duckdb").path
    PosixPath('/tmp/x.duckdb')
    """
    scheme = re.match(r"\s*([a-zA-Z][\w.-]*)", url)
    kind = {"postgresql": "postgres", "postgres": "postgres", "mysql": "mysql",
            "mariadb": "mysql", "duckdb": "duckdb"}.get(scheme.group(1).lower() if scheme else "")
    if kind is None:
        raise UsageError(f"cannot copy into {scheme.group(1) if scheme else mask_password(url)!r}: the URL must start with "
                         "postgresql://, mysql://, mariadb:// or duckdb:///")
    if kind == "duckdb":
        path = url.split("://", 1)[1][1:].split("?")[0]
        if not path:
            raise UsageError("a duckdb URL names a file or folder: duckdb:///path/file.duckdb")
        return Target(kind, url, path=Path(path).expanduser())
    parts = parse_url(url)  # (its query parameters go to the driver: `_connect`)
    return Target(kind, url, parts["host"] or "localhost", parts["port"], parts["user"], parts["password"],
                  parts["database"])


@dataclass
class CopyReport:
    """What one copy did, and what it had to change."""

    name: str
    url: str  # of the copy
    tables: int = 0
    rows: int = 0
    retyped: list[str] = field(default_factory=list)  # "table.column INTEGER -> TEXT (why)"
    integer_text: list[str] = field(default_factory=list)  # text columns of integers -> BIGINT
    emptied: int = 0  # empty strings in numeric columns made NULL
    cleaned: int = 0  # NUL characters taken out of text (PostgreSQL refuses them)
    primary_keys: int = 0
    primary_keys_skipped: list[str] = field(default_factory=list)
    foreign_keys: int = 0
    foreign_keys_skipped: list[str] = field(default_factory=list)
    grant_note: str = ""  # MySQL: why --grant was given table by table, not on the database
    seconds: float = 0.0

    def add(self, other: CopyReport) -> None:
        """Count ``other``'s copy in this one (totals over several databases)."""
        for name in ("tables", "rows", "emptied", "cleaned", "primary_keys", "foreign_keys",
                     "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("retyped", "integer_text", "primary_keys_skipped", "foreign_keys_skipped"):
            getattr(self, name).extend(getattr(other, name))

    def line(self) -> str:
        changed = [f"{len(self.retyped)} columns retyped" if self.retyped else "",
                   f"{len(self.integer_text)} text columns of integers -> BIGINT"
                   if self.integer_text else "",
                   f"{self.emptied} empty strings -> NULL" if self.emptied else "",
                   f"{self.cleaned} NUL characters removed" if self.cleaned else "",
                   f"{len(self.primary_keys_skipped)} primary keys skipped"
                   if self.primary_keys_skipped else "",
                   f"{len(self.foreign_keys_skipped)} foreign keys skipped"
                   if self.foreign_keys_skipped else "", self.grant_note]
        extra = "; ".join(c for c in changed if c)
        return (f"{self.name}: {self.tables} tables, {self.rows} rows, {self.primary_keys} primary"
                f" keys, {self.foreign_keys} foreign keys{'; ' + extra if extra else ''}"
                f" ({self.seconds:.1f} s)")


# ------------------------------------------------------------------------------ reading SQLite


def _affinity(declared: str) -> str:
    """SQLite's type affinity of a declared type (https://sqlite.org/datatype3.html, 3.1)."""
    t = declared.upper()
    if "INT" in t:
        return "int"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if "BLOB" in t or not t.strip():
        return "blob"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


@dataclass
class _Column:
    name: str  # lowercased
    declared: str
    kind: str = "text"  # int, real, text, blob
    empty_to_null: bool = False


@dataclass
class _Table:
    name: str
    written: str  # as SQLite names it
    columns: list[_Column]
    rows: list[list]
    primary_key: list[str]
    foreign_keys: list[tuple[list[str], str, list[str] | None]]  # (columns, table, columns)


_INTEGER_TEXT = re.compile(r"-?[1-9][0-9]{0,17}|0")


def _kind(column: _Column, values: list, table: str, report: CopyReport,
          value_types: bool = True) -> None:
    """Decide the column's target kind from its declared type and its values."""
    seen = {type(v) for v in values if v is not None}
    has_text = str in seen
    blank = has_text and all(not v.strip() for v in values if isinstance(v, str))
    affinity = _affinity(column.declared)
    dated = any(k in column.declared.upper() for k in ("DATE", "TIME"))
    big = int in seen and any(isinstance(v, int) and not _INT64[0] <= v <= _INT64[1]
                              for v in values)
    if affinity == "text" and value_types and seen == {str} and all(
            _INTEGER_TEXT.fullmatch(v) for v in values if v is not None):
        column.kind = "int"  # `year = 2014` finds '2014' in SQLite (the number made text)
        report.integer_text.append(f"{table}.{column.name} {column.declared} -> BIGINT")
    elif affinity == "text" or (dated and has_text):
        column.kind = "text"
    elif affinity == "blob" and not seen - {bytes}:
        column.kind = "blob" if seen else "text"
    elif has_text and not blank or bytes in seen or big:
        column.kind = "text"
        why = "text values" if has_text else "binary values" if bytes in seen else "huge integers"
        if affinity != "blob":
            report.retyped.append(f"{table}.{column.name} {column.declared} -> TEXT ({why})")
    else:
        column.empty_to_null = blank
        if blank:
            report.emptied += sum(isinstance(v, str) for v in values)
        column.kind = "real" if affinity == "real" or float in seen else "int"
        if affinity == "int" and float in seen:
            report.retyped.append(f"{table}.{column.name} {column.declared} -> DOUBLE"
                                  " (non-integer numbers)")


def _read(sqlite_file: Path, report: CopyReport, value_types: bool = True) -> list[_Table]:
    conn = sqlite3.connect(sqlite_uri(sqlite_file), uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " ORDER BY rowid")]
        tables = []
        for written in names:
            quoted = '"' + written.replace('"', '""') + '"'
            info = conn.execute(f"PRAGMA table_info({quoted})").fetchall()
            columns = [_Column(c[1].lower(), c[2] or "") for c in info]
            rows = [list(r) for r in conn.execute(f"SELECT * FROM {quoted}")]
            for i, column in enumerate(columns):
                _kind(column, [r[i] for r in rows], written.lower(), report, value_types)
            keys = [c[1].lower() for c in sorted((c for c in info if c[5]), key=lambda c: c[5])]
            fks: dict[int, tuple[list[str], str, list]] = {}
            for fk in conn.execute(f"PRAGMA foreign_key_list({quoted})"):
                entry = fks.setdefault(fk[0], ([], fk[2].lower(), []))
                entry[0].append(fk[3].lower())
                entry[2].append(fk[4].lower() if fk[4] else None)
            foreign = [(cols, parent, None if None in refs else refs)
                       for cols, parent, refs in fks.values()]
            tables.append(_Table(written.lower(), written, columns, rows, keys, foreign))
        return tables
    finally:
        conn.close()


def _convert(table: _Table, report: CopyReport, strip_nul: bool) -> None:
    """The rows as the target types take them (in place)."""
    for i, column in enumerate(table.columns):
        for row in table.rows:
            value = row[i]
            if value is None:
                continue
            if column.kind == "text":
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                elif not isinstance(value, str):
                    value = repr(value) if isinstance(value, float) else str(value)
                if strip_nul and "\x00" in value:
                    report.cleaned += value.count("\x00")
                    value = value.replace("\x00", "")
            elif isinstance(value, str):  # blank text in a numeric column, or an integer's text
                value = int(value) if value.strip() and column.kind == "int" else None
            elif column.kind == "real":
                value = float(value)
            row[i] = value


# ------------------------------------------------------------------------------ keys


def _key_ok(table: _Table, columns: list[str]) -> str | None:
    """Why ``columns`` cannot be the table's key (None: they can)."""
    names = [c.name for c in table.columns]
    if any(c not in names for c in columns):
        return "names a missing column"
    index = [names.index(c) for c in columns]
    values = [tuple(r[i] for i in index) for r in table.rows]
    if any(v is None for key in values for v in key):
        return "holds NULL"
    if len(set(values)) != len(values):
        return "values repeat"
    return None


def _fk_problem(table: _Table, fk, by_name: dict[str, _Table], keys: dict[str, list[str]]):
    columns, parent_name, refs = fk
    parent = by_name.get(parent_name)
    if parent is None:
        return "references a missing table"
    refs = refs or keys.get(parent_name)
    if not refs or len(refs) != len(columns):
        return "references no primary key"
    names = [c.name for c in table.columns]
    parent_names = [c.name for c in parent.columns]
    if any(c not in names for c in columns) or any(c not in parent_names for c in refs):
        return "names a missing column"
    if sorted(refs) != sorted(keys.get(parent_name, [])):
        return "references columns that are not the parent's primary key"
    kinds = {c.name: c.kind for c in table.columns}
    parent_kinds = {c.name: c.kind for c in parent.columns}
    if any(kinds[c] != parent_kinds[r] for c, r in zip(columns, refs, strict=True)):
        return "column types differ"
    index = [names.index(c) for c in columns]
    parent_index = [parent_names.index(c) for c in refs]
    present = {tuple(r[i] for i in parent_index) for r in parent.rows}
    for row in table.rows:
        key = tuple(row[i] for i in index)
        if None not in key and key not in present:
            return "values with no parent row"
    return None


# ------------------------------------------------------------------------------ writing


def _quote(kind: str, name: str) -> str:
    return f"`{name.replace('`', '``')}`" if kind == "mysql" else '"' + name.replace('"', '""') + '"'


def _connect(t: Target, database: str | None):
    """A connection to ``database`` (None: PostgreSQL's maintenance database, MySQL's none) on the
    server ``t`` names, with the URL's query parameters (``sslmode``, ``host=/socket/folder``,
    MySQL's ``unix_socket``, ...) as ``model.data.databases.connection_kwargs`` passes them."""
    if t.kind in ("postgres", "mysql"):
        url = {**parse_url(t.url), "database": database or ("postgres" if t.kind == "postgres" else "")}
        kwargs = {"host": "localhost", **connection_kwargs(url, mask_password(t.url))}
        if t.kind == "postgres":
            import psycopg

            return psycopg.connect(autocommit=True, **kwargs)
        import pymysql

        if "user" not in kwargs and "read_default_file" not in kwargs:
            kwargs["user"] = "root"
        return pymysql.connect(autocommit=True, **kwargs)
    import duckdb

    return duckdb.connect(str(database))


def _create_database(t: Target, name: str) -> None:
    if t.kind == "duckdb":
        return
    conn = _connect(t, None)  # PostgreSQL's maintenance database, MySQL's none
    try:
        if t.kind == "postgres":
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() \
                    is None:
                conn.execute(f"CREATE DATABASE {_quote('postgres', name)}")
        else:
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS {_quote('mysql', name)}"
                               " CHARACTER SET utf8mb4")
    finally:
        conn.close()


def _column_type(kind: str, table: _Table, column: _Column, keyed: set[str]) -> str:
    if kind == "mysql" and column.kind == "text" and column.name in keyed:
        i = [c.name for c in table.columns].index(column.name)
        longest = max((len(r[i]) for r in table.rows if r[i] is not None), default=0)
        if longest <= 255:
            return "VARCHAR(255)"
    return _TYPES[kind][column.kind]


def _insert(kind: str, cursor, table: _Table) -> None:
    q = _quote(kind, table.name)
    if kind == "postgres":
        columns = ", ".join(_quote(kind, c.name) for c in table.columns)
        with cursor.copy(f"COPY {q} ({columns}) FROM STDIN") as copy:
            for row in table.rows:
                copy.write_row(row)
        return
    width = len(table.columns)
    mark = "%s" if kind == "mysql" else "?"
    one = "(" + ", ".join([mark] * width) + ")"
    for start in range(0, len(table.rows), _BATCH):
        chunk = table.rows[start:start + _BATCH]
        cursor.execute(f"INSERT INTO {q} VALUES " + ", ".join([one] * len(chunk)),
                       [v for row in chunk for v in row])


def _ordered(tables: list[_Table], fks: dict[str, list]) -> list[_Table]:
    """Parents before children (DuckDB checks a foreign key as rows arrive)."""
    by_name = {t.name: t for t in tables}
    done: list[_Table] = []
    seen: set[str] = set()

    def visit(t: _Table, path: set[str]) -> None:
        if t.name in seen:
            return
        path = path | {t.name}
        for _, parent, _ in fks.get(t.name, []):
            if parent not in path and parent in by_name:
                visit(by_name[parent], path)
        seen.add(t.name)
        done.append(t)

    for t in tables:
        visit(t, set())
    return done


def copy_database(sqlite_file: str | Path, url: str, name: str | None = None,
                  grant: str | None = None, value_types: bool = True) -> CopyReport:
    """Copy ``sqlite_file`` into the database ``name`` (default: the file's stem) on the server
    ``url`` names; the copy's URL and what was changed are in the returned `CopyReport`.
    ``grant``: a role (user) given SELECT on the copied tables (PostgreSQL); MySQL (``user``,
    any host, or ``user@host``): on the copy's database when it holds the copy's tables alone,
    else on the copied tables (`_grant_mysql`).
    ``value_types``: a TEXT column whose every value is an integer's text becomes BIGINT (False:
    it stays TEXT, as declared)."""
    start = time.perf_counter()
    sqlite_file = Path(sqlite_file)
    if not sqlite_file.is_file():
        raise UsageError(f"no SQLite file at {sqlite_file}")
    t = target(url)
    name = name or sqlite_file.stem
    report = CopyReport(name, t.url_of(name))
    try:
        tables = _read(sqlite_file, report, value_types)
    except sqlite3.DatabaseError as error:
        raise UsageError(f"{sqlite_file}: not a readable SQLite database ({error})") from None
    for table in tables:
        _convert(table, report, strip_nul=t.kind == "postgres")
    by_name = {table.name: table for table in tables}
    keys: dict[str, list[str]] = {}
    for table in tables:
        if table.primary_key:
            why = _key_ok(table, table.primary_key)
            if why is None:
                keys[table.name] = table.primary_key
            else:
                report.primary_keys_skipped.append(f"{table.name}: {why}")
    fks: dict[str, list] = {}
    for table in tables:
        for fk in table.foreign_keys:
            why = _fk_problem(table, fk, by_name, keys)
            if why is None and t.kind == "duckdb" and fk[1] == table.name:
                why = "references its own table (DuckDB refuses it)"
            if why is None:
                fks.setdefault(table.name, []).append((fk[0], fk[1], fk[2] or keys[fk[1]]))
            else:
                report.foreign_keys_skipped.append(
                    f"{table.name}({', '.join(fk[0])}) -> {fk[1]}: {why}")
    if t.kind == "duckdb":
        file = t.file(name)
        file.parent.mkdir(parents=True, exist_ok=True)
        database: str | None = str(file)
    else:
        _create_database(t, name)
        database = name
    conn = _connect(t, database)
    kind = t.kind
    try:
        cursor = conn.cursor()
        if kind == "mysql":
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
        for table in reversed(_ordered(tables, fks)):
            cascade = " CASCADE" if kind == "postgres" else ""
            cursor.execute(f"DROP TABLE IF EXISTS {_quote(kind, table.name)}{cascade}")
        for table in _ordered(tables, fks):
            keyed = set(keys.get(table.name, [])) | {c for cols, _, _ in fks.get(table.name, [])
                                                      for c in cols}
            keyed |= {r for child in fks.values() for _, p, refs in child if p == table.name
                      for r in refs}
            parts = [f"{_quote(kind, c.name)} {_column_type(kind, table, c, keyed)}"
                     for c in table.columns]
            if kind == "duckdb":  # DuckDB takes keys only in CREATE TABLE
                if table.name in keys:
                    parts.append(f"PRIMARY KEY ({_names(kind, keys[table.name])})")
                for cols, parent, refs in fks.get(table.name, []):
                    parts.append(f"FOREIGN KEY ({_names(kind, cols)}) REFERENCES "
                                 f"{_quote(kind, parent)} ({_names(kind, refs)})")
            cursor.execute(f"CREATE TABLE {_quote(kind, table.name)} ({', '.join(parts)})")
            _insert(kind, cursor, table)
            report.tables += 1
            report.rows += len(table.rows)
        if kind == "duckdb":
            report.primary_keys = len(keys)
            report.foreign_keys = sum(len(v) for v in fks.values())
        else:
            _add_keys(kind, cursor, keys, fks, report)
            if grant and kind == "postgres":
                for table in tables:
                    cursor.execute(f"GRANT SELECT ON {_quote(kind, table.name)} TO {_quote(kind, grant)}")
            elif grant:
                _grant_mysql(cursor, name, [table.name for table in tables], grant, report)
        if kind == "duckdb":
            conn.execute("CHECKPOINT")
    finally:
        conn.close()
    report.seconds = time.perf_counter() - start
    return report


def _grant_mysql(cursor, name: str, copied: list[str], grant: str, report: CopyReport) -> None:
    """SELECT for ``grant`` on the database ``name`` when its tables are the copy's alone, else
    on each copied table (said in ``report``): the database's other tables stay unreadable.
    On the database, a table the copy lacks (a name in another case, on Linux) reads "doesn't
    exist"; granted table by table it reads "SELECT command denied", as MySQL checks the grants
    before it looks for the table."""
    cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
    others = sorted({row[0] for row in cursor.fetchall()} - set(copied))
    database, account = _quote("mysql", name), _mysql_account(grant)
    if not others:
        cursor.execute(f"GRANT SELECT ON {database}.* TO {account}")
        return
    for table in copied:
        cursor.execute(f"GRANT SELECT ON {database}.{_quote('mysql', table)} TO {account}")
    report.grant_note = (f"SELECT granted on the copied tables alone (the database holds {len(others)} "
                         f"other table{'s' if len(others) > 1 else ''}: {', '.join(others[:3])}"
                         f"{', ..' if len(others) > 3 else ''})")


def _mysql_account(grant: str) -> str:
    """A MySQL account, ``'user'@'host'``, as ``--grant`` names it: ``user`` (any host: ``%``) or
    ``user@host`` (``scorer@localhost``).

    >>> _mysql_account("scorer"), _mysql_account("scorer@localhost"), _mysql_account("o'k")
    ("'scorer'@'%'", "'scorer'@'localhost'", "'o''k'@'%'")
    """
    user, _, host = grant.rpartition("@") if "@" in grant else (grant, "", "%")
    return "@".join("'" + part.replace("\\", "\\\\").replace("'", "''") + "'" for part in (user, host))


def _names(kind: str, columns: list[str]) -> str:
    return ", ".join(_quote(kind, c) for c in columns)


def _add_keys(kind: str, cursor, keys, fks, report: CopyReport) -> None:
    """Primary keys, then foreign keys, each by ALTER TABLE; one the server refuses is counted."""
    errors = _errors(kind)
    for table, columns in keys.items():
        try:
            cursor.execute(f"ALTER TABLE {_quote(kind, table)} ADD PRIMARY KEY"
                           f" ({_names(kind, columns)})")
            report.primary_keys += 1
        except errors as error:
            report.primary_keys_skipped.append(f"{table}: refused ({_first_line(error)})")
    for table, entries in fks.items():
        for columns, parent, refs in entries:
            try:
                cursor.execute(f"ALTER TABLE {_quote(kind, table)} ADD FOREIGN KEY"
                               f" ({_names(kind, columns)}) REFERENCES {_quote(kind, parent)}"
                               f" ({_names(kind, refs)})")
                report.foreign_keys += 1
            except errors as error:
                report.foreign_keys_skipped.append(
                    f"{table}({', '.join(columns)}) -> {parent}: refused ({_first_line(error)})")


def _errors(kind: str):
    if kind == "postgres":
        import psycopg

        return psycopg.Error
    import pymysql

    return pymysql.MySQLError


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__


# ------------------------------------------------------------------------------ command line


def _sqlite_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*/*.sqlite")) or sorted(path.glob("*.sqlite"))
            if not found:
                raise UsageError(f"no *.sqlite files under {path}")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"no SQLite file or folder at {path}")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.data.copy_database",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="SQLite files or folders")
    parser.add_argument("url", help="the target server: postgresql://, mysql+pymysql://, duckdb:///")
    parser.add_argument("--name", help="the copy's database name (one source only; default: "
                                       "the file's name)")
    parser.add_argument("--grant", help="a role (user) given SELECT on the copied tables "
                                        "(MySQL: on the copy's database when it holds no other table; "
                                        "USER for 'USER'@'%%', or USER@HOST)")
    parser.add_argument("--declared-types", action="store_true",
                        help="keep TEXT columns of integers TEXT (default: BIGINT)")
    parser.add_argument("--details", action="store_true",
                        help="list each retyped column and skipped key")
    args = parser.parse_args(argv)
    try:
        files = _sqlite_files(args.sources)
        if args.name and len(files) != 1:
            raise UsageError("--name needs exactly one SQLite file")
        target(args.url)
        total = CopyReport(f"{len(files)} databases", args.url)
        for k, file in enumerate(files, 1):
            report = copy_database(file, args.url, args.name, args.grant,
                                   value_types=not args.declared_types)
            print(f"[{k}/{len(files)}] {report.line()} -> {mask_password(report.url)}", flush=True)
            total.add(report)
            if args.details:
                for line in (*report.retyped, *report.integer_text, *report.primary_keys_skipped,
                             *report.foreign_keys_skipped):
                    print(f"    {line}")
        if len(files) > 1:
            print(f"together: {total.line()}")
    except UsageError as error:
        say_error(parser.prog, error)
        return 2
    except Exception as error:  # noqa: BLE001 - an unreachable server, a wrong password...: one line naming it
        say_error(parser.prog, f"{mask_password(args.url)}: {type(error).__name__}: {_first_line(error)}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
