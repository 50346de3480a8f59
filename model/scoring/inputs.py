"""What ``rat-score``, ``rat-adapt``, ``rat-calibrate``, ``rat-serve`` and ``rat-mcp`` read from
a user, and the checks every such input passes before any work is done: the model, the schemas,
the named connections (``--database NAME=URL``) and each row's fields (a db_id that names a
database folder, text that can be written back as UTF-8, a database path that stays under the
data root once symlinks are resolved).
(``model.scoring.fields``).
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from pathlib import Path
from typing import Any

from model.errors import ModelFileError, UsageError
from model.scoring.fields import dialect_name, field_problem

MIN_QUERY_TIMEOUT_S = 0.1  # the least --query-timeout: each database read's time limit while scoring


def load_scorer(model: str, option: str = "--model"):
    """``Scorer.load(model)``; a model that cannot be used is a ``UsageError`` naming ``option``."""
    from model.scoring.scorer import Scorer

    try:
        return Scorer.load(model)
    except ModelFileError as e:
        raise UsageError(f"{option} {model}: {e}") from None


def check_service_options(args: Any, positive: tuple[str, ...]) -> None:
    """The options ``rat-serve`` and ``rat-mcp`` share (``data_root``, ``schema``, ``dialect``:
    stored lower case, None where not given) and the ``positive`` numbers among them, checked:
    ``UsageError`` (one line) names the first bad one."""
    if args.data_root and not args.data_root.is_dir():
        raise UsageError(f"--data-root {args.data_root}: no such directory")
    if args.schema and not args.schema.is_file():
        raise UsageError(f"--schema {args.schema}: no such file")
    if args.dialect is not None:
        try:
            args.dialect = dialect_name(args.dialect)
        except UsageError as error:
            raise UsageError(f"--dialect: {error}") from None
    for name in positive:
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0):  # nan compares false and inf bounds nothing
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number, found {value}")


def add_deployment_options(parser: argparse.ArgumentParser) -> None:
    """``rat-serve``'s and ``rat-mcp``'s ``--policy`` and ``--query-timeout`` (read by
    ``deployment_options``)."""
    parser.add_argument("--policy", metavar="RUN_AT,REGENERATE_BELOW",
                        help="the verdicts' thresholds on the whole-query confidence, each in [0, 1] (RUN_AT "
                             "'none': nothing runs unseen); such a policy runs no query scored without its "
                             "database (review instead); default: the policy saved with the model")
    parser.add_argument("--query-timeout", type=float, metavar="SECONDS",
                        help="the time limit of each read of a database while scoring (default: the scorer's, 5 s; "
                             f"given: {MIN_QUERY_TIMEOUT_S:g} to --timeout-s, whose deadline stops a read anyway); a "
                             "query that runs past it is scored without its result")


def deployment_options(args: argparse.Namespace):
    """``args``' ``--policy`` as a ``Policy`` (None where not given: the model's own) and its
    ``--query-timeout``, where given, checked (from ``MIN_QUERY_TIMEOUT_S`` to ``--timeout-s``: a
    longer one never acts); ``UsageError`` (one line) naming the option. Call it after
    ``check_service_options`` (``--timeout-s``).

    >>> from argparse import Namespace
    >>> deployment_options(Namespace(policy="0.9, none", query_timeout=None, timeout_s=10.0))
    Traceback (most recent call last):
    ...
    model.errors.UsageError: --policy 0.9, none: regenerate_below: expected a number in [0, 1], found None
    >>> deployment_options(Namespace(policy="none,0.4", query_timeout=None, timeout_s=10.0)).target
    'thresholds given (never run unseen, regenerate below 0.40), not chosen on a measured curve'
    """
    from model.errors import UsageError
    from model.nodes.policy import Policy

    seconds = args.query_timeout
    if seconds is not None and not (math.isfinite(seconds) and MIN_QUERY_TIMEOUT_S <= seconds <= args.timeout_s):
        raise UsageError(f"--query-timeout {seconds:g}: expected seconds from {MIN_QUERY_TIMEOUT_S:g} to "
                         f"--timeout-s ({args.timeout_s:g})")
    if args.policy is None:
        return None
    given = args.policy[:80]
    parts = [part.strip() for part in args.policy.split(",")]
    if len(parts) != 2:
        raise UsageError(f"--policy {given}: expected RUN_AT,REGENERATE_BELOW (two numbers in [0, 1]; RUN_AT "
                         "may be 'none')")
    values: list[float | None] = []
    for part in parts:
        try:
            values.append(None if part.lower() == "none" else float(part))
        except ValueError:
            raise UsageError(f"--policy {given}: {part[:40]!r} is not a number") from None
    try:
        return Policy(*values)
    except (TypeError, ValueError) as e:
        raise UsageError(f"--policy {given}: {e}") from None


def read_schemas(schema: Path | None = None, data_root: Path | None = None, dialect: str = "sqlite",
                 db_id: str | None = None) -> dict:
    """db_id -> ``rat.Schema`` from a ``tables.json`` (``schema``), a ``.sql`` file of ``CREATE
    TABLE`` statements written in ``dialect`` (one schema, named ``db_id`` or the file's name) or
    a dataset folder (``data_root``); ``{}`` with neither. A file that cannot be read as schemas
    is one ``UsageError`` line naming it, and so are both given (the root's schemas were dropped
    for the file's, its databases read against them).

    >>> read_schemas(Path("shop.sql"), Path("spider"))
    Traceback (most recent call last):
    ...
    model.errors.UsageError: --schema and --data-root: give one (--data-root's folder holds its databases' schemas; --schema alone scores without a database, or with --database)
    """
    from model.data.datasets import load_schemas, schemas_of
    from model.data.jsonl import read_json

    if schema is not None and data_root is not None:
        raise UsageError("--schema and --data-root: give one (--data-root's folder holds its databases' schemas; "
                         "--schema alone scores without a database, or with --database)")
    where = schema or data_root
    try:
        if schema and Path(schema).suffix.lower() in (".sql", ".ddl"):
            from model.data.databases import read_ddl_lines, schema_from_ddl

            name = db_id or Path(schema).stem
            with Path(schema).open("rb") as file:  # SSMS's "Unicode text" is UTF-16 with its BOM
                utf16 = file.read(2) in (b"\xff\xfe", b"\xfe\xff")
            with Path(schema).open(encoding="utf-16" if utf16 else "utf-8-sig") as file:  # (a whole dump: its rows not held)
                return {name: schema_from_ddl(read_ddl_lines(file), dialect, name, f"--schema {schema}")}
        if schema:
            return schemas_of(read_json(schema), f"--schema {schema}")
        if data_root:
            return load_schemas(data_root)
    except UsageError:  # told in one line naming the file
        raise
    except UnicodeDecodeError:
        raise UsageError(f"{where}: cannot read schemas (not UTF-8 text: a binary file?)") from None
    except RecursionError:
        raise UsageError(f"{where}: cannot read schemas (nested too deeply)") from None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as e:
        raise UsageError(f"{where}: cannot read schemas ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:200]})") from None
    return {}


def file_under(root: Path, path: str | Path) -> Path | None:
    """``path`` (relative to ``root``, or absolute) once every symlink is resolved, if that is a
    file under ``root`` (resolved); else None: a link that leads out of it, a loop of links,
    nothing there. What ``rat-serve`` reads of a request's ``database`` path and of a db_id's
    file (``database_under``) alike."""
    root = Path(root).resolve()
    try:
        real = (root / path).resolve()
        return real if real.is_relative_to(root) and real.is_file() else None
    except (OSError, RuntimeError, ValueError):  # (a loop of links is a RuntimeError in Python 3.11)
        return None


def database_under(root: Path, db_id: str) -> Path | None:
    """The SQLite file of ``db_id`` under ``root`` (``model.data.datasets.database_path``) once
    every symlink is resolved, or None when there is none or it resolves outside ``root``
    (a folder linked to elsewhere is not read: ``file_under``). ``db_id`` must have passed
    ``field_problem``."""
    from model.data.datasets import database_path

    path = database_path(Path(root).resolve(), db_id)
    return None if path is None else file_under(root, path)


class DatabaseFiles:
    """``database_under(root, db_id)`` for the many requests of a service, with less work each:
    a database reached without any link is remembered with the parts of its path below the
    root; a later request gets it when ``database_path`` names the same file again and none of
    those parts has become a link (``lstat`` of each, instead of resolving every part of the
    path and the root again). Anything else asks ``database_under`` again, so the answer is
    always the one it gives: a folder linked out of the root is refused, a file gone is None.
    Only files found are remembered (at most one per database on disk)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.plain: dict[str, tuple[Path, list[str]]] = {}  # db_id -> (its file, the parts of its path)

    def __call__(self, db_id: str) -> Path | None:
        from model.data.datasets import database_path

        path = database_path(self.root, db_id)
        known = self.plain.get(db_id)
        if known is not None and path == known[0] and _no_links(known[1]):
            return path
        found = database_under(self.root, db_id)
        if found is not None and found == path:  # no link on the way
            below = found.relative_to(self.root).parts
            self.plain[db_id] = (found, [str(self.root.joinpath(*below[:k])) for k in range(1, len(below) + 1)])
        else:
            self.plain.pop(db_id, None)
        return found


def _no_links(paths: list[str]) -> bool:
    """Whether every one of ``paths`` is there and none is a symbolic link."""
    try:
        return not any(stat.S_ISLNK(os.lstat(p).st_mode) for p in paths)
    except OSError:
        return False


def database_dialects(names, named: dict, dialect: str | None = None) -> dict[str, str]:
    """Name -> the SQL each database of ``rat-serve`` / ``rat-mcp`` reads when a query names no
    dialect: ``dialect`` (``--dialect``), else a named connection's own (``named``: name -> URL),
    else SQLite's (a ``--data-root``'s files).

    >>> database_dialects(["crm", "shop"], {"crm": "duckdb:///crm.duckdb"})
    {'crm': 'duckdb', 'shop': 'sqlite'}
    """
    from model.data.databases import database_dialect

    return {name: dialect or (database_dialect(named[name]) if name in named else "sqlite") for name in sorted(names)}


def named_databases(specs: list[str], schemas: dict, scorer) -> dict[str, str]:
    """``--database NAME=URL`` options as name -> URL, each opened once now (read-only) to be
    sure it answers, and its schema read into ``schemas`` unless they have it; a malformed
    option or a database that cannot be opened is a ``UsageError`` (one line, password masked)."""
    from model.data.databases import mask_password, open_database
    from model.errors import UsageError

    named: dict[str, str] = {}
    for spec in specs:
        name, sep, url = spec.partition("=")
        name = name.strip()
        if not sep or not name or not url:
            raise UsageError(f"--database {mask_password(spec)}: expected NAME=URL")
        if field_problem("db_id", name) or name in named:
            raise UsageError(f"--database {name}: not a plain name, or given twice")
        with open_database(url, timeout_s=scorer.feature_timeout_s,
                           max_result_bytes=scorer.max_result_bytes) as db:
            if name not in schemas:
                schemas[name] = db.schema(name)
        named[name] = url
    return named
