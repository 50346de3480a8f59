"""``rat-score``: per-node confidence, "look here first" and reasons for your own SQL.

One query, printed as a coloured tree:

    rat-score --data-root ../shared/data/spider --db-id concert_singer \\
        --question "How many singers are older than 40?" --sql "SELECT count(*) FROM singer WHERE age > 40"

A prediction file (``.txt``/``.csv``/``.json`` in question order, as ``model.data.predictions``
reads them, or JSONL rows ``{question_id | question, db_id, sql}``) -> one JSON row per scored
prediction and ``report.html`` beside it:

    rat-score --data-root ../shared/data/spider --split dev --predictions preds.txt --out scored.jsonl
    rat-score --schema ../shared/data/bird/dev_tables.json --predictions rows.jsonl --out scored.jsonl

Several files (one per system, each row's system being its file's name unless the row names
one) are scored together: a consensus model (``model.groups=single+consensus``) reads each
query against the other systems' answers to the same question.

``--data-root`` gives schemas, questions and databases (opened read-only); ``--schema`` alone
(a ``tables.json``, or a ``.sql`` file of ``CREATE TABLE`` statements in ``--dialect``) scores
without a database. ``--database`` names one database every query is read against: a SQLite or
DuckDB file, or a URL (``postgresql://user:pw@host:5432/db``, ``mysql+pymysql://..``,
``duckdb:///file.duckdb``), opened read-only; without ``--schema`` its schema is read from it:

    rat-score --database postgresql://scorer:pw@localhost/shop \
        --question "Customers in Lyon?" --sql "SELECT name FROM customers WHERE city ILIKE 'lyon'"

The SQL is read in the ``--database``'s dialect (``postgres`` here), else SQLite's; ``--dialect
postgres`` (or mysql, duckdb, snowflake, bigquery, tsql, databricks, trino, redshift) names
another; a JSONL row's own ``dialect`` field wins. ``--model pretrained`` (default) or a saved model / neural run.
A mistake in the command line is one line and exit code 2; a row that cannot be scored is
counted and reported, and the run goes on.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from model.data.databases import database_dialect, is_database_url, mask_password
from model.errors import UsageError, check_writable, quiet_closed_pipes, say_error
from model.scoring.fields import MAX_NODES, MAX_SQL_CHARS, row_problem
from model.scoring.inputs import load_scorer, read_schemas
from rat.dialects import DIALECTS

REPORT_QUERIES = 200  # queries report.html shows, the least confident first (evaluate.py's html.max_examples)
CHUNK_ROWS = 1024  # rows of a file scored at a time, each chunk's written before the next is scored


def add_source_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--data-root``, ``--split``, ``--schema``, ``--no-database``: where schemas, questions
    and databases come from (``verb``: what the command does without databases)."""
    source = parser.add_argument_group("schemas and databases")
    source.add_argument("--data-root", type=Path, help="a Spider/BIRD folder: schemas, questions, databases")
    source.add_argument("--split", default="dev",
                        help="with --data-root: the questions the files answer (default: dev)")
    source.add_argument("--schema", type=Path, help="tables.json (Spider/BIRD format), or a .sql file of "
                        "CREATE TABLE statements in --dialect: schemas only, no database")
    source.add_argument("--no-database", action="store_true", help=f"with --data-root: {verb} without databases")
    source.add_argument("--database", metavar="URL_OR_FILE",
                        help="the database every query is read against (read-only): a SQLite or DuckDB "
                             "file, or a URL: postgresql://user:pw@host:5432/db, mysql+pymysql://..., "
                             "duckdb:///file.duckdb, sqlite:///file.sqlite")
    source.add_argument("--dialect", metavar="NAME",
                        help=f"the SQL dialect of the queries: {', '.join(sorted(DIALECTS))} (default: the "
                             "--database's own, postgres for a postgresql:// URL; else sqlite; a JSONL row's "
                             "own 'dialect' field wins)")


def check_database(args) -> None:
    """``--database`` and ``--no-database`` together, or a ``--database`` file that is not
    there: one line."""
    if args.no_database and args.database is not None:
        raise UsageError("--no-database and --database: give one")
    if args.database is not None and not args.database.strip():
        raise UsageError("--database: empty (give a database URL or file)")
    if args.database and not is_database_url(args.database):
        try:
            check_file(Path(args.database), "--database")
        except UsageError as e:  # (`user:password@host/db` without its scheme: a path, its password masked)
            raise UsageError(str(e).replace(str(Path(args.database)), mask_password(str(Path(args.database))))) from None


def check_file(path: Path, option: str) -> None:
    """``path`` is a file: else one line naming ``option`` (no such file, a folder, or a device,
    pipe or socket: read to its end, such a file could hold the command forever)."""
    try:
        is_file, is_dir, exists = path.is_file(), path.is_dir(), path.exists()
    except (OSError, ValueError) as e:  # a name too long, a NUL
        raise UsageError(f"{option} {str(path)[:80]!r}: not a path that can be read ({type(e).__name__})") from None
    if not is_file:
        raise UsageError(f"{option} {path}: " + ("a folder, not a file" if is_dir else
                                                 "not a regular file (a device, pipe or socket)" if exists
                                                 else "no such file"))


def check_predictions(paths) -> None:
    """Each ``--predictions`` file is there and given once: a file named twice, or the same
    outputs under two names (by content), would be read as two systems' (rat-score would score,
    and with ``--label-shift`` move, its rows twice; rat-adapt would read them as two systems that
    agree): one line."""
    seen: dict[str, Path] = {}
    for path in paths or ():
        check_file(path, "--predictions")
        if len(paths) < 2:
            continue
        try:
            with path.open("rb") as file:
                digest = hashlib.file_digest(file, "sha256").hexdigest()
        except OSError as e:
            raise UsageError(f"--predictions {path}: cannot be read ({e.strerror or e})") from None
        if digest in seen:
            raise UsageError(f"--predictions {seen[digest]} and {path}: the same outputs twice")
        seen[digest] = path


def check_outputs(args) -> None:
    """``--out`` and ``--report`` (the default report, ``report.html`` beside ``--out``, only
    where ``--out`` is a regular file or new: not beside ``/dev/stdout``) are neither an input
    nor each other: one line, before any work."""
    if args.out is not None and args.report is None and (not args.out.exists() or args.out.is_file()):
        args.report = args.out.with_name("report.html")
    inputs = [("--predictions", path) for path in args.predictions or ()]
    inputs += [(f"--{name}", getattr(args, name)) for name in ("schema", "database")
               if getattr(args, name) is not None and not is_database_url(getattr(args, name))]
    outputs = [(f"--{name}", getattr(args, name)) for name in ("out", "report") if getattr(args, name) is not None]
    for k, (option, path) in enumerate(outputs):
        for other, input_path in inputs + outputs[:k]:
            if _same_file(path, input_path):
                what = "an input of this command" if other in dict(inputs) else "what --out writes"
                raise UsageError(f"{option} {path}: the same file as {other} ({what}; it would be overwritten)")


def _written(option: str, path: Path, write) -> None:
    """``write()``, a write error (a full disk, a device that refuses writes) one line naming ``option``."""
    try:
        write()
    except BrokenPipeError:  # (--out /dev/stdout | head -1: a reader that stopped, quiet_closed_pipes)
        raise
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot be written ({e.strerror or e})") from None


def _same_file(a, b) -> bool:
    a, b = Path(a), Path(b)
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def check_dialect(args) -> None:
    """``--dialect``: a ``rat.DIALECTS`` name (any case, stored lower case), else one line;
    without it, the ``--database``'s own dialect, else ``sqlite``."""
    if args.dialect is None:
        database = getattr(args, "database", None)
        args.dialect = database_dialect(database) if database else "sqlite"
    from model.scoring.fields import dialect_name

    try:
        args.dialect = dialect_name(args.dialect)
    except UsageError as error:
        raise UsageError(f"--dialect: {error}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rat-score", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="pretrained",
                        help="'pretrained' (default; fitted on Spider), 'pretrained:spider_transfer' (fitted on "
                             "Spider to score another benchmark), 'pretrained:spider_consensus' (reads each query "
                             "beside other systems' answers to its question), a <run>/model directory, or a neural "
                             "run / .ckpt")
    add_source_arguments(parser, "score")
    one = parser.add_argument_group("one query")
    one.add_argument("--sql")
    one.add_argument("--question", default="")
    one.add_argument("--db-id", default=None,
                     help="the database of --sql, and of --predictions rows without a db_id (default: the one "
                          "schema given)")
    parser.add_argument("--check", action="store_true",
                        help="answer each query's verdict under the model's policy (run, review or regenerate, "
                             "with feedback) instead of its tree; exit status 1 when any is not 'run'")
    one.add_argument("--json", action="store_true", help="print the JSON row instead of the tree")
    one.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--max-nodes", type=int, default=MAX_NODES, metavar="N",
                        help=f"the most nodes a query's tree may have to be scored (default: {MAX_NODES}; a long "
                             "model of chained CTEs has more)")
    parser.add_argument("--max-sql-chars", type=int, default=MAX_SQL_CHARS, metavar="N",
                        help=f"the most characters of a query's SQL that is scored (default: {MAX_SQL_CHARS})")
    many = parser.add_argument_group("a prediction file")
    many.add_argument("--predictions", type=Path, nargs="+",
                      help="one or more prediction files (several: one per system, for a consensus model)")
    many.add_argument("--out", type=Path, help="the JSONL to write (default: standard output)")
    many.add_argument("--report", type=Path, help="report.html path (default: beside --out)")
    many.add_argument("--no-reasons", action="store_true", help="skip per-node reasons (faster)")
    many.add_argument("--quantiles", choices=("model", "rows"), default="model",
                      help="for a model trained with model.quantiles=true: read the count features against "
                           "the nodes it was trained on (model), or against the file's own (rows: outputs of "
                           "another benchmark or domain; all rows are read before any is scored)")
    many.add_argument("--choose", action="store_true",
                      help="the rows are candidates (several answers to each question: one question_id, or one "
                           "db_id and question): write, for each question, the one whose tree most of them share "
                           "(Scorer.choose), with "
                           "'agreeing' (how many share its tree) and 'candidates'")
    many.add_argument("--label-shift", action="store_true",
                      help="estimate each file's rate of right queries by EM (files of 100 or more scored "
                           "queries) and move its whole-query confidences to it (default: off; measured, it "
                           "made Spider systems' confidences worse: docs/scoring.md, 'Rates without labels')")
    return parser


@quiet_closed_pipes()
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.sql is not None and args.predictions:
            raise UsageError("give --sql (one query) or --predictions (a file), not both")
        if args.sql is None and not args.predictions:
            raise UsageError("give --sql (one query) or --predictions (a file)")
        if args.sql is not None and not args.sql.strip():
            raise UsageError("--sql: empty")
        check_database(args)
        if args.check and args.label_shift:
            raise UsageError("--check and --label-shift: the policy's thresholds are for confidences not moved")
        if args.sql is not None and args.label_shift:
            raise UsageError("--sql and --label-shift: a rate is estimated on a file of queries (100 or more), "
                             "not on one")
        if args.choose and (args.sql is not None or args.check or args.label_shift):
            raise UsageError("--choose reads a --predictions file of candidates, without --check or --label-shift")
        check_dialect(args)
        for option in ("max_nodes", "max_sql_chars"):
            if getattr(args, option) < 1:
                raise UsageError(f"--{option.replace('_', '-')} must be a positive number, found {getattr(args, option)}")
        if args.data_root and not args.data_root.is_dir():
            raise UsageError(f"--data-root {args.data_root}: no such directory")
        if args.schema:
            check_file(args.schema, "--schema")
        check_predictions(args.predictions)
        for option in ("out", "report"):
            if getattr(args, option) is not None:
                check_writable(getattr(args, option), f"--{option}")
        check_outputs(args)
        schemas = read_schemas(args.schema, args.data_root, args.dialect, args.db_id)
        if args.schema and args.schema.suffix.lower() in (".sql", ".ddl") and not args.db_id:
            args.db_id = next(iter(schemas))
        scorer = load_scorer(args.model)
        if args.check and scorer.policy is None:
            raise UsageError(f"--check: the model ({scorer.description}) has no policy saved; choose one with "
                             "python -m model.scoring.policy")
        if args.label_shift and (problem := label_shift_problem(scorer.saved)):
            raise UsageError(f"--label-shift: the model ({scorer.description}) {problem}")
        if args.quantiles == "rows" and args.sql:
            raise UsageError("--quantiles rows reads a prediction file's own queries: give --predictions")
        if args.quantiles == "rows" and getattr(scorer.saved, "quantiles_", None) is None:
            raise UsageError(f"--quantiles rows: the model {args.model} does not read quantiles "
                             "(trained without model.quantiles=true)")
        with _opened(args, scorer):
            _check_database_tables(args)
            if args.sql:
                return score_one(scorer, args, schemas)
            return score_file(scorer, args, schemas)
    except UsageError as e:
        say_error("rat-score", e)
        return 2


def label_shift_problem(model) -> str | None:
    """Why ``model``'s whole-query confidences cannot be moved to a file's rate, whatever the
    file (``model.label_shift.source_rate``); None where they can."""
    from model.label_shift import source_rate

    if model is None:
        return "records no rate of right queries it was calibrated at (a neural model)"
    if source_rate(model) is None:
        adapted = ((model.info_ or {}).get("trained_on") or {}).get("adapted_on") is not None
        return "records no rate of right queries it was calibrated at" + (
            " (an adapted model: its rates are its teacher's, moved already)" if adapted else "")
    return None


def trained_with_databases(model) -> bool:
    """Whether ``model`` (a ``BoostedNodeModel``; None: a neural model) reads database features
    that every query it learnt from had, and has no calibrators for queries scored without a
    database: ``model.database=with`` on execution labels (each training query's database at
    hand), validated and tested with them. Scored without one, those features are missing as in
    no query it learnt from (``model.database=dropout`` trains a model for both)."""
    from model.nodes.features import DATABASE_FEATURES

    if model is None or getattr(model, "without_database_", None) is not None:
        return False
    info = model.info_ or {}
    config = info.get("config") or {}
    return (config.get("database", "with") == "with" and bool(config.get("test_database", True))
            and (info.get("trained_on") or {}).get("labels") == "execution"
            and bool(set(model.features_) & set(DATABASE_FEATURES)))


# said once a run where such a model (trained_with_databases) scores queries without their database
WITHOUT_DATABASE = ("by a model trained with every query's database (model.database=with): its database features "
                    "are missing, as in no query it learnt from (model.database=dropout trains one for both)")


@contextmanager
def _opened(args, scorer):
    """``args.database`` opened read-only (``model.data.databases``) while the command runs: a
    host that cannot be reached, bad credentials, an unknown database or a missing driver is a
    ``DatabaseError`` (one line, the password masked) before anything is scored or written."""
    if not args.database:
        yield
        return
    from model.data.databases import open_database

    target = args.database
    args.database = open_database(target, timeout_s=scorer.feature_timeout_s,
                                  max_result_bytes=scorer.max_result_bytes)
    try:
        yield
    finally:
        args.database.close()
        args.database = target


def _database(args, db_id: str | None):
    if getattr(args, "database", None):
        return args.database
    if args.no_database or not args.data_root or not db_id:
        return None
    from model.data.datasets import database_path

    return database_path(args.data_root, db_id)


def score_one(scorer, args, schemas: dict) -> int:
    import rat
    from model.scoring.fields import field_problem
    from model.scoring.scorer import format_scored
    from rat.text import printable

    problem = field_problem("db_id", args.db_id)
    if problem:
        raise UsageError(f"--{problem.replace('_', '-', 1)}")
    if args.db_id and schemas and args.db_id not in schemas:
        raise UsageError(f"--db-id {args.db_id}: not among the {len(schemas)} schemas given")
    if schemas and not args.db_id:
        raise UsageError("--db-id is needed with --data-root or --schema")
    schema = schemas.get(args.db_id)
    if args.database and schema is None:  # read from the database: the query's tables must be in it
        from model.data.databases import refusal

        schema = args.database.schema(args.db_id or "")
        # (CREATE, SET ROLE, SELECT .. INTO, GET_LOCK(), MySQL's /*! .. */: not sent, nor probed;
        # scoring refuses them, and says SQL that does not parse does not parse)
        missing = [] if refusal(args.sql, args.database.dialect) else _unknown_tables(args.sql, args.dialect, schema)
        if missing:  # not there, or not the role's to read (its columns are not in the schema read)
            name, written = missing[0]
            _, error = args.database.run(f"SELECT 1 FROM {written} WHERE 1 = 0", args.dialect)
            if error is None:  # (a system catalogue: pg_class)
                problem = f"table {name!r} is not in the schema read from {args.database.name}"
            elif "denied" in error:  # PostgreSQL's "permission denied", MySQL's "SELECT command denied"
                problem = f"table {name!r} is not readable by this role on {args.database.name} ({error})"
            else:
                problem = f"no table {name!r} in {args.database.name}"
            if not args.check:  # (the wrong database?); a check judges the query: a made-up table is its error
                raise UsageError(f"--sql: {problem}")
            print(f"rat-score: {problem}", file=sys.stderr)
    query = {"question": args.question, "schema": schema, "database": _database(args, args.db_id),
             "db_id": args.db_id, "dialect": args.dialect, "max_nodes": args.max_nodes,
             "max_sql_chars": args.max_sql_chars}
    try:  # a Verdict with --check, else a ScoredQuery
        result = scorer.check(args.sql, **query) if args.check else scorer.score(args.sql, **query)
    except UsageError:  # a database that cannot be read, an unknown dialect: named as they are
        raise
    except (rat.RATError, ValueError, TypeError, RuntimeError) as e:  # (RuntimeError: a bug in rat, RowError.kind)
        message = str(e).splitlines()[0]  # (it quotes at most 200 characters of the SQL)
        if message.startswith("question: "):  # the option at fault
            raise UsageError(f"--{message}") from None
        if message.endswith(" are scored"):  # (over a bound: the option that raises it)
            message += f" (--{'max-nodes' if 'nodes' in message else 'max-sql-chars'} raises it)"
        raise UsageError(f"--sql: {message.removeprefix('sql: ')}") from None
    if not (result.scored if args.check else result).with_database and trained_with_databases(scorer.saved):
        print(f"rat-score: scored without its database {WITHOUT_DATABASE}", file=sys.stderr)
    if args.check:
        print(json.dumps(result.to_dict()) if args.json else
              f"{result.action} (query confidence {result.query_confidence:.2f})\n{printable(result.feedback)}")
        return 0 if result.action == "run" else 1
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(format_scored(result, color=color))
    return 0


def _unknown_tables(sql: str, dialect: str, schema) -> list[tuple[str, str]]:
    """The tables ``sql`` reads that ``schema`` lacks (``_tables_read``), each as (its name, its
    name as ``sql`` writes it); [] when it cannot tell."""
    names = _tables_read(sql, dialect) or {}
    return [(n, written) for n, written in names.items() if n.lower() not in schema.tables]


def _tables_read(sql: str, dialect: str) -> dict[str, str] | None:
    """The tables ``sql`` reads (its own CTEs aside), each name -> as ``sql`` writes it; None
    when it cannot tell. A name qualified by a schema or database (``archive.old_orders``) is
    left out: the schema is read from the URL's database alone, and another may hold it (scoring
    reads the query as it is)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from rat.canonicalize import quiet_sqlglot
    from rat.errors import deeply

    try:  # (too deeply nested to read: a DepthError, a ValueError)
        with quiet_sqlglot():  # (sqlglot's note on SQL it reads as a command: not the user's line)
            tree = deeply(sqlglot.parse_one, sql, dialect)
    except (SqlglotError, ValueError):
        return None
    if tree is None:  # (an empty statement)
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return {t.name: t.this.sql(dialect=dialect) for t in tree.find_all(exp.Table)
            if t.name and not t.db and t.name.lower() not in ctes}


def tables_told(result) -> bool:
    """Whether the tables ``result`` (a ``ScoredQuery``) reads can be told against the schema it
    was read against: it has one, the query reads a table, and none of another schema
    (``In_schema``: another may hold it). Its table nodes, as scoring read them."""
    return (result.schema is not None and any(n.kind == "table" for n in result.nodes)
            and not any(n.label == "In_schema" for n in result.nodes))


def reads_only_missing_tables(result) -> bool:
    """``result`` (a ``ScoredQuery``) reads tables (``tables_told``) and none of them is in the
    schema it was read against."""
    schema = result.schema
    return tables_told(result) and not any(t in schema.tables for n in result.nodes if n.kind == "table"
                                           for t in schema.tables_of(n.label.lower()))


def schema_source(args) -> str:
    """Where the schemas the rows are read against come from, as the command line names it."""
    if args.schema:
        return f"--schema {args.schema}"
    if getattr(args, "database", None):
        return f"--database {getattr(args.database, 'name', args.database)}"
    return "their db_id's schema under --data-root"


def read_rows(args, schemas: dict, skipped: Counter) -> list[dict]:
    """The rows to score: a JSONL of ``{question_id | question, db_id, sql}``, or any prediction
    format ``model.data.predictions`` reads (with ``--data-root`` for the questions, and their
    gold SQL as ``gold`` where a row has none). A row without a db_id is of ``--db-id``'s
    database, else of the one schema given."""
    from model.data.datasets import load_questions

    questions = {}
    if args.data_root:
        try:
            questions = {q.question_id: q for q in load_questions(args.data_root, args.split)}
        except (FileNotFoundError, ValueError) as e:
            raise UsageError(f"--data-root {args.data_root} --split {args.split}: {e}") from None
        if not questions:  # (every row would be read as one of the user's own, without its question)
            raise UsageError(f"--data-root {args.data_root} --split {args.split}: no questions")
    rows = []
    owner: dict[str, Path] = {}  # system -> the file its rows come from
    for path in args.predictions:
        for row in _file_rows(path, questions, skipped):
            system = str(row["system"])
            if owner.setdefault(system, path) != path:  # (two files' rows read as one system's)
                raise UsageError(f"--predictions {owner[system]} and {path}: both hold rows of system {system!r} "
                                 "(a file's name names the system of rows without one): rename one")
            rows.append({**row, "_file": str(path)})
    default_db = getattr(args, "db_id", None) or (next(iter(schemas)) if len(schemas) == 1 else None)
    for row in rows:
        if row.get("db_id") is None and default_db is not None:
            row["db_id"] = default_db
        db_id = row.get("db_id")
        if schemas and db_id is None:
            row["_error"] = "no db_id"
        elif schemas and db_id not in schemas:
            row["_error"] = f"unknown db_id {db_id!r}"
        row["schema"] = schemas.get(db_id)
        row["database"] = _database(args, db_id)
        if row.get("dialect") is None:
            row["dialect"] = args.dialect
    return rows


def _file_rows(path: Path, questions: dict, skipped: Counter) -> list[dict]:
    """One prediction file's rows; a row that names no system is the file's (its name without
    the suffix), as in the positional formats."""
    from model.data.jsonl import read_objects
    from model.data.predictions import PredictionFileError, load_predictions, question_of

    rows = []
    if path.suffix.lower() == ".jsonl":
        for row in read_objects(path, skipped):
            if row.get("sql") is None:
                skipped["no sql field"] += 1
                continue
            problem = row_problem(row)  # sql that is a number, a db_id that is a list, a lone surrogate...
            if problem:
                skipped[f"malformed {problem.split(':')[0]}"] += 1
                continue
            q, problem = question_of(row, questions) if questions else (None, None)  # (--data-root's)
            if problem == "unknown question_id" and row.get("question"):
                problem = None  # a row of the user's own, with its question, is kept
            if problem:
                skipped[problem] += 1
                continue
            if q is not None:
                if not row.get("gold"):  # the benchmark's gold SQL is SQLite's
                    row["gold_dialect"] = "sqlite"
                row = {**row, "question": row.get("question") or q.question, "db_id": row.get("db_id") or q.db_id,
                       "evidence": row.get("evidence") or q.evidence, "gold": row.get("gold") or q.gold_sql}
            if not row.get("system"):
                row["system"] = path.stem
            rows.append(row)
        return rows
    if not questions:
        raise UsageError(f"--predictions {path}: a positional file needs --data-root "
                         "(and --split) for its questions; or give JSONL rows with question and db_id")
    try:
        for p in load_predictions(path, list(questions.values()), skipped=skipped):
            q = questions[p.question_id]
            row = {"question_id": p.question_id, "db_id": p.db_id, "sql": p.sql,
                   "question": q.question, "evidence": q.evidence, "system": p.system, "gold": q.gold_sql,
                   "gold_dialect": "sqlite"}
            problem = row_problem(row)
            if problem:
                skipped[f"malformed {problem.split(':')[0]}"] += 1
                continue
            rows.append(row)
    except PredictionFileError as e:
        raise UsageError(str(e)) from None
    return rows


def chunks(groups: list[list[int]], limit: int) -> list[list[int]]:
    """The positions of ``groups`` (a question's candidates, or the answers a consensus model
    reads together) in chunks of ``limit`` positions or a few more, each group whole in one
    chunk, in order of the groups; each chunk's positions in order.

    >>> chunks([[0], [1], [2], [3], [4]], 2)
    [[0, 1], [2, 3], [4]]
    >>> chunks([[0, 3], [1, 4], [2]], 2)
    [[0, 3], [1, 4], [2]]
    """
    out: list[list[int]] = [[]]
    for group in groups:
        if len(out[-1]) >= limit:
            out.append([])
        out[-1].extend(group)
    return [sorted(chunk) for chunk in out if chunk]


def score_file(scorer, args, schemas: dict) -> int:
    from tqdm.auto import tqdm

    from model.data.jsonl import write_jsonl
    from model.eval.report import html_report, write_report
    from model.scoring.choice import CANDIDATES, MAX_CANDIDATES, choice_of, groups_of
    from model.scoring.scorer import RowError, report_entries

    skipped: Counter = Counter()
    rows = read_rows(args, schemas, skipped)
    total = len(rows) + sum(skipped.values())  # rows read, and rows no reader could take
    good = [r for r in rows if "_error" not in r]
    lent = set()  # with --choose: rows without a question_id, lent one their group shares while scored
    if args.choose:  # (a model that reads the other answers reads a question's rows by question_id)
        for group in groups_of(good):  # candidates compared with each other: more than Scorer.choose
            if len(group) > MAX_CANDIDATES:  # takes cost more than linear time; not scored, counted
                for i in group:
                    good[i]["_error"] = f"over {MAX_CANDIDATES} candidates for one question"
        good = [r for r in good if "_error" not in r]
        for n, group in enumerate(groups_of(good)):
            if good[group[0]].get("question_id") is None:
                for i in group:
                    good[i]["question_id"] = f"{CANDIDATES}:{n}"
                lent.update(group)
    skipped.update(r["_error"].split(" '")[0] for r in rows if "_error" in r)
    # the rows are scored CHUNK_ROWS at a time and each chunk's rows written before the next is
    # scored: a file's results are never held whole (about 20 KB a row). Label shift and the rows'
    # own quantiles read every row's scores first: one chunk.
    # With --choose or a model that reads the other answers (a consensus model), a question's
    # rows are scored together: the rows come out question by question.
    if args.label_shift or args.quantiles == "rows":
        parts = [list(range(len(good)))]
    elif args.choose or scorer.reads_other_answers:
        parts = chunks(groups_of(good), CHUNK_ROWS)
    else:
        parts = chunks([[k] for k in range(len(good))], CHUNK_ROWS)
    # what "right" means for the whole-query confidence (None: a neural model, which records none);
    # a calibrator pair rat-calibrate refitted alone has its own (model.label_shift.query_label_for)
    from model.label_shift import query_label_for

    label, written_labels = getattr(scorer.saved, "query_label", None), Counter()
    shifts, actions, unfamiliar, lacking = [], Counter(), Counter(), Counter()
    counts = Counter()  # scored: rows scored; written: rows written; odd: scored rows with unfamiliar nodes
    least: list = []  # (confidence, position, row, result) of the REPORT_QUERIES least confident so far
    # a system the model was fitted on (its trained_on.systems): the benchmark those outputs were on
    trained = (getattr(scorer.saved, "info_", None) or {}).get("trained_on") or {}

    def scored_rows(part: list[int]):
        """The rows of one chunk scored, as ``--out`` writes them; what the notes and the report
        need is kept on the side."""
        batch = [good[k] for k in part]
        verdicts = None
        if args.check:  # each query's verdict (Scorer.check_many), and the scored query it holds
            verdicts = scorer.check_many(batch, progress=bar, quantiles=args.quantiles, label_shift=False,
                                         max_nodes=args.max_nodes, max_sql_chars=args.max_sql_chars)
            results = [v if isinstance(v, RowError) else v.scored for v in verdicts]
        else:
            results = scorer.score_many(batch, progress=bar, reasons=not args.no_reasons,
                                        quantiles=args.quantiles, label_shift=False,
                                        max_nodes=args.max_nodes, max_sql_chars=args.max_sql_chars)
        if args.label_shift:  # each file (one system's outputs) alone
            from model.label_shift import MIN_QUERIES, shift_scored

            for path in args.predictions:
                mine = [r for row, r in zip(batch, results) if row["_file"] == str(path) and not isinstance(r, RowError)]
                if (found := shift_scored(mine, scorer.saved)) is not None:
                    shifts.append((path, found))
                elif len(mine) < MIN_QUERIES:  # (a model without its rate is refused before scoring)
                    shifts.append((path, (f"label shift: {len(mine)} queries scored, fewer than {MIN_QUERIES}: "
                                          "no rate estimated, confidences not moved")))
                else:  # (a model of two calibrator pairs, one without its rate)
                    shifts.append((path, ("label shift: the model records no rate of right queries for the "
                                          "calibrator these queries were scored with: not moved")))
        for j, k in enumerate(part):
            if k in lent:
                good[k]["question_id"] = None
                if not isinstance(results[j], RowError):
                    results[j].question_id = None
        chosen = None  # with --choose: position in the chunk -> (agreeing, candidates) of each question's choice
        if args.choose:
            chosen = {}
            for group in groups_of(batch):
                if (choice := choice_of([results[i] for i in group])) is not None:
                    chosen[group[choice.index]] = (choice.agreeing, len(group))
        mine, written = [], []
        for j, (row, result) in enumerate(zip(batch, results)):
            if isinstance(result, RowError):
                skipped[result.reason] += 1
                continue
            counts["scored"] += 1
            counts["missing tables"] += reads_only_missing_tables(result)
            counts["without database"] += not result.with_database
            odd = [n.kind for n in result.nodes if n.unfamiliar]
            unfamiliar.update(odd)
            counts["odd"] += bool(odd)
            if args.data_root and row.get("db_id") and row.get("database") is None:
                lacking[row["db_id"]] += 1
            if chosen is not None and j not in chosen:
                continue
            mine.append((result.query_confidence, part[j], row, result))
            if verdicts is not None:
                d = {"question_id": result.question_id, "db_id": result.db_id, **verdicts[j].to_dict()}
                actions[d["action"]] += 1
            else:
                d = result.to_dict()
            d["system"] = row.get("system")
            if str(row.get("system")) in (trained.get("systems") or {}):
                d["fitted_on_system"] = trained.get("data_root") or True
            if label is not None:
                d["query_label"] = query_label_for(scorer.saved, result.with_database)
                written_labels[(d["query_label"], result.with_database)] += 1
            if chosen is not None:
                d["agreeing"], d["candidates"] = chosen[j]
            written.append(d)
        # the chunk counted and its least confident kept before its first row is written: a reader
        # that stops early (| head) leaves a report of the rows scored
        least[:] = heapq.nsmallest(REPORT_QUERIES, least + mine, key=lambda entry: entry[:2])
        for d in written:
            counts["written"] += 1
            yield d

    bar = tqdm(total=len(good), desc="scoring", unit="query", leave=False)

    def out_rows():
        for part in parts:  # (score_many moves the bar as each batch of a chunk is scored)
            yield from scored_rows(part)

    stopped = None
    try:
        if args.out:
            _written("--out", args.out, lambda: write_jsonl(args.out, out_rows()))
        else:
            for d in out_rows():
                sys.stdout.write(json.dumps(d) + "\n")
    except BrokenPipeError as e:  # a reader that stopped early (| head): the report holds the rows scored till then
        stopped = e
    finally:
        bar.close()
    # the report: the least confident queries first, at most REPORT_QUERIES (a page of every row of
    # a large file would be hundreds of MB), each with its system
    means = _label_meanings(written_labels) if label is not None else None
    entries = report_entries([result for *_, result in least])
    for entry, (_, _, row, _) in zip(entries, least):
        entry["system"] = row.get("system")
    title = (f"rat-score: {', '.join(p.name for p in args.predictions)}: the {len(least)} least confident "
             f"of {counts['scored']} queries")
    if args.report:
        _written("--report", args.report, lambda: write_report(args.report, html_report(
            entries, title=title, query_confidence_means=means)))
    if stopped is not None:
        raise stopped
    where = " and ".join(str(p) for p in (args.out, args.report) if p) if args.out else "standard output"
    note = _skipped_note(skipped, "not scored")
    if means:
        print(f"rat-score: whole-query confidence = {means}", file=sys.stderr)
    if args.choose:
        print(f"rat-score: scored {counts['scored']} of {total} rows with {scorer.description}; chose one for each of "
              f"{counts['written']} questions (most common tree) -> {where}{note}", file=sys.stderr)
    else:
        print(f"rat-score: scored {counts['written']} of {total} "
              f"rows with {scorer.description} -> {where}{note}", file=sys.stderr)
    for path, found in shifts:
        moved = "; whole-query confidences moved to it" if not isinstance(found, str) and found.fits else ""
        print(f"rat-score: {path.name}: {found}{moved}", file=sys.stderr)
    if counts["missing tables"]:  # (--sql refuses such a query unless --check; a file's are scored: said here, many or few)
        most = " (the schema of these queries?)" if 2 * counts["missing tables"] >= counts["scored"] else ""
        print(f"rat-score: {counts['missing tables']} of {counts['scored']} queries read only tables "
              f"{schema_source(args)} lacks{most}", file=sys.stderr)
    if counts["without database"] and trained_with_databases(scorer.saved):
        print(f"rat-score: {counts['without database']} of {counts['scored']} queries scored without their database "
              f"{WITHOUT_DATABASE}", file=sys.stderr)
    if unfamiliar:
        print(f"rat-score: {unfamiliar_note(unfamiliar, counts['odd'], counts['scored'])}", file=sys.stderr)
    if args.data_root and not args.no_database and not getattr(args, "database", None) and lacking:
        # (--data-root's folder has no file for them: scored as without a database)
        print(f"rat-score: {sum(lacking.values())} rows scored without their database (no file under "
              f"--data-root for db_id " + ", ".join(f"{d} ({n})" for d, n in lacking.most_common(5)) + ")",
              file=sys.stderr)
    if args.check:
        print("rat-score: verdicts: " + ", ".join(f"{a} {actions[a]}" for a in ("run", "review", "regenerate")),
              file=sys.stderr)
        return 0 if set(actions) <= {"run"} and not skipped else 1  # (a row not checked is not a 'run')
    return 0


def unfamiliar_note(kinds: Counter, queries: int, scored: int) -> str:
    """How many of ``scored`` queries (``queries``) have nodes the model reads as an unknown
    operator, and of which ``kinds`` (each counted per node).

    >>> unfamiliar_note(Counter({"Or": 1}), 1, 2)
    '1 of 2 queries have operators the model does not know (Or 1): their confidences there say little'
    """
    shown = ", ".join(f"{k} {c}" for k, c in kinds.most_common(5)) + (", ..." if len(kinds) > 5 else "")
    return (f"{queries} of {scored} queries have operators the model does not know ({shown}): "
            "their confidences there say little")


def build_adapt_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rat-adapt", description="Fit a single-system model again, without labels, on what a consensus "
                                      "model (the teacher) reads in several systems' outputs to your questions.",
        epilog="Another consensus teacher: python train.py model=features model.groups=single+consensus ... "
               "(docs/scoring.md, 'rat-adapt').")
    parser.add_argument("--model", default="pretrained",
                        help="the single-system model to adapt: 'pretrained' (default) or a <run>/model directory")
    parser.add_argument("--teacher", default="pretrained:spider_consensus",
                        help="a consensus model: 'pretrained:spider_consensus' (default: shipped, fitted on "
                             "Spider without databases) or a <run>/model directory")
    add_source_arguments(parser, "adapt")
    parser.add_argument("--predictions", type=Path, nargs="+", required=True,
                        help="two or more systems' outputs on the same questions (one file per system)")
    parser.add_argument("--out", type=Path, required=True, help="the adapted model's directory (written)")
    parser.add_argument("--label-shift", action="store_true",
                        help="move the teacher's rates of right nodes and queries to those EM estimates on the "
                             "outputs (100 or more; default: off: measured, it put the rate of right queries "
                             "far off: docs/scoring.md, 'rat-adapt')")
    return parser


def _label_meanings(labels: Counter) -> str | None:
    """What the whole-query confidences written mean, from the (label, scored with a database)
    of each row: one label, "P(right by ..)"; two (a model whose calibrator pairs rat-calibrate
    refitted to other labels, rows scored both ways), each with the rows it is of."""
    from model.nodes.estimator import LABEL_MEANING

    by_label = {}
    for (name, with_database), _ in labels.most_common():
        by_label.setdefault(name, []).append("with a database" if with_database else "without one")
    if not by_label:
        return None
    if len(by_label) == 1:
        name = next(iter(by_label))
        return f"P(right by {LABEL_MEANING.get(name, name)})"
    return "; ".join(f"P(right by {LABEL_MEANING.get(name, name)}) {' and '.join(ways)}"
                     for name, ways in by_label.items())


def _skipped_note(skipped: Counter, what: str) -> str:
    """``"; not used: 3 (not a JSON line 2, unknown db_id 1)"``, or nothing when no row was left out."""
    return f"; {what}: {sum(skipped.values())} ({', '.join(f'{k} {v}' for k, v in skipped.most_common())})" \
        if skipped else ""


def _usable_rows(args) -> tuple[list[dict], Counter]:
    """``read_rows``' rows that name a known database, each system's first for a question (a
    second would count its label twice) and, of rows without a question_id, each system's first
    of one query to one question, and the count of those left out, by reason."""
    skipped: Counter = Counter()
    rows = read_rows(args, read_schemas(args.schema, args.data_root, args.dialect), skipped)
    seen: set = set()
    for row in rows:
        if "_error" in row:
            continue
        if row.get("question_id") is not None:
            key, why = ("id", row["system"], str(row["question_id"])), "duplicate question_id"
        else:  # (the same row twice: one output counted twice)
            key, why = ("row", row["system"], row.get("db_id"), row.get("question") or "", row["sql"]), "duplicate row"
        if key in seen:
            row["_error"] = why
        seen.add(key)
    skipped.update(r["_error"].split(" '")[0] for r in rows if "_error" in r)
    return [r for r in rows if "_error" not in r], skipped


def _check_paths(args) -> None:
    """One line for each input path of ``rat-adapt`` / ``rat-calibrate`` that is not there, and
    for an ``--out`` that would overwrite something other than a model."""
    if args.data_root and not args.data_root.is_dir():
        raise UsageError(f"--data-root {args.data_root}: no such directory")
    if args.schema:
        check_file(args.schema, "--schema")
    check_predictions(args.predictions)
    if args.out.exists() and (not args.out.is_dir() or (any(args.out.iterdir())
                                                        and not (args.out / "model.json").is_file())):
        raise UsageError(f"--out {args.out}: exists and is not a model directory (not overwritten)")
    from model.scoring.scorer import PRETRAINED

    models = [Path(m) for m in (args.model, getattr(args, "teacher", None)) if m and Path(m).is_dir()]
    if any(args.out.resolve().is_relative_to(m.resolve()) for m in [*PRETRAINED.values(), *models]):
        raise UsageError(f"--out {args.out}: a model this command reads (not overwritten; write the new model "
                         "elsewhere)")
    check_writable(args.out, "--out", directory=True)


def _check_database_tables(args) -> None:
    """A ``--database`` (opened) the rows' schema is read from, without a table: one line naming
    it (every row would be left out as ``schema: no tables``)."""
    if getattr(args, "database", None) and not args.schema and not args.database.schema("").tables:
        raise UsageError(f"--database {args.database.name}: no tables (an empty database, or none this role "
                         "may read)")


def _check_tables_read(args, results: list) -> None:
    """Most outputs (half or more of those whose tables can be told: ``tables_told``) reading
    only tables the schema they are read against lacks: one line naming where it comes from. A
    system's query now and then names a table that is not there (a wrong query, scored as such);
    half a run's outputs doing so are outputs of other databases (``--database`` of another, the
    wrong ``--schema``): adapted on, they would teach that a table not in the schema is the norm.
    ``results``: the teacher's ``ScoredQuery`` of the outputs (``adapt``'s ``check``, before any
    fit): the tables as scoring read them, no output parsed a second time."""
    told = [r for r in results if tables_told(r)]
    missing = sum(reads_only_missing_tables(r) for r in told)
    if told and 2 * missing >= len(told):
        raise UsageError(f"--predictions: {missing} of {len(told)} outputs read only tables {schema_source(args)} "
                         "lacks (the schema of these outputs?)")


def _lend_question_ids(rows: list[dict]) -> None:
    """Rows without a question_id, given one their question shares (as ``--choose`` groups
    them): a question_id of a row of the same db_id and question, else one of its own
    (``candidates:<n>``). A row without its question text keeps none."""
    from model.scoring.choice import CANDIDATES, groups_of

    known: dict[tuple, set] = {}  # (db_id, question) -> the question_ids rows of it have
    for r in rows:
        if r.get("question_id") is not None and r.get("question"):
            known.setdefault((r.get("db_id"), r["question"]), set()).add(str(r["question_id"]))
    for n, group in enumerate(groups_of(rows)):
        first = rows[group[0]]
        if first.get("question_id") is not None or not first.get("question"):
            continue
        ids = known.get((first.get("db_id"), first["question"]), set())
        for i in group:
            rows[i]["question_id"] = next(iter(ids)) if len(ids) == 1 else f"{CANDIDATES}:{n}"


@quiet_closed_pipes()
def adapt_main(argv: list[str] | None = None) -> int:
    """``rat-adapt``: see ``model.scoring.adapt``."""
    from model.scoring.adapt import AdaptError, adapt

    args = build_adapt_parser().parse_args(argv)
    try:
        _check_paths(args)
        check_database(args)
        check_dialect(args)
        scorer = load_scorer(args.model)
        model, teacher = scorer.saved, load_scorer(args.teacher, "--teacher").saved
        if model is None or teacher is None:
            raise UsageError("--model and --teacher must be boosted models (<run>/model of a model=features run)")
        with _opened(args, scorer):
            _check_database_tables(args)
            rows, skipped = _usable_rows(args)
            if not rows:  # (say why: rows of other field names are all left out)
                raise UsageError(f"--predictions: no output to adapt on{_skipped_note(skipped, 'left out')}")
            _lend_question_ids(rows)
            try:
                started = time.monotonic()
                result = adapt(model, teacher, rows, label_shift=args.label_shift,
                               check=lambda results: _check_tables_read(args, results))
            except AdaptError as e:  # (the models' own mistakes name the option that gave them)
                if e.argument:
                    raise UsageError(f"--{e.argument} {getattr(args, e.argument)}: {e}") from None
                raise UsageError(f"--predictions: {e}{_skipped_note(skipped, 'left out')}") from None
        _written("--out", args.out, lambda: result.model.save(args.out))  # whole or not at all
    except UsageError as e:
        say_error("rat-adapt", e)
        return 2
    skipped.update(result.errors)
    note = _skipped_note(skipped, "not used")
    print(f"rat-adapt: adapted on {result.queries} outputs ({result.nodes} nodes) of {result.questions} "
          f"questions, {result.shared_questions} answered by two or more of {len(result.systems)} systems "
          f"-> {args.out} in {time.monotonic() - started:.0f} s{note}", file=sys.stderr)
    if result.estimated_rates:
        (node_before, query_before), (node_after, query_after) = result.teacher_rates, result.estimated_rates
        print(f"rat-adapt: right nodes {node_before:.1%} -> {node_after:.1%}, right queries {query_before:.1%} -> "
              f"{query_after:.1%} [95% {result.query_shift.low:.1%}, {result.query_shift.high:.1%}] (the teacher's "
              "training data -> estimated on these outputs)", file=sys.stderr)
    elif args.label_shift and result.not_shifted:  # asked for, nothing moved: why
        print(f"rat-adapt: {result.not_shifted}", file=sys.stderr)
    return 0


def build_calibrate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rat-calibrate", description="Fit a saved model's node and whole-query calibrators again on a few "
                                          "labelled outputs of yours (their gold SQL); the node model and the site "
                                          "head stay as they are.",
        epilog="How many labelled queries it takes: docs/scoring.md, 'rat-calibrate'.")
    parser.add_argument("--model", default="pretrained",
                        help="'pretrained' (default), a <run>/model directory or a rat-adapt output")
    add_source_arguments(parser, "label and score")
    parser.add_argument("--predictions", type=Path, nargs="+", required=True,
                        help="labelled outputs: JSONL rows {question, db_id, sql, gold[, correct]}, or files "
                             "answering --data-root's questions (their gold SQL is read from there); correct, "
                             "where given, is the row's label: true/false or 1/0 (also as text, any case)")
    parser.add_argument("--out", type=Path, required=True, help="the recalibrated model's directory (written)")
    parser.add_argument("--calibration", choices=("platt", "isotonic"), default="platt",
                        help="the node calibrator: platt (default; a few dozen queries) or isotonic (hundreds)")
    parser.add_argument("--labels", choices=("execution", "tree"), default="execution",
                        help="execution match where a database can be read (default), else tree comparison "
                             "with gold; or tree comparison always")
    parser.add_argument("--always-refit", action="store_true",
                        help="refit even where, cross-fitted on these outputs, a refit predicts them no better "
                             "than the model as given (default: keep the model's calibrators then)")
    return parser


@quiet_closed_pipes()
def calibrate_main(argv: list[str] | None = None) -> int:
    """``rat-calibrate``: see ``model.scoring.recalibrate``."""
    from model.scoring.recalibrate import RecalibrationError, recalibrate

    args = build_calibrate_parser().parse_args(argv)
    try:
        _check_paths(args)
        check_database(args)
        check_dialect(args)
        scorer = load_scorer(args.model)
        model = scorer.saved
        if model is None:
            raise UsageError("--model must be a boosted model (<run>/model of a model=features run)")
        with _opened(args, scorer):
            _check_database_tables(args)
            rows, skipped = _usable_rows(args)
            if not rows:
                raise UsageError(f"--predictions: no row to label{_skipped_note(skipped, 'left out')}")
            try:
                result = recalibrate(model, rows, calibration=args.calibration,
                                     labels=args.labels, select=not args.always_refit)
            except RecalibrationError as e:  # (with the rows no reader took)
                raise UsageError(f"--predictions: {e}{_skipped_note(skipped, 'left out before')}") from None
        _written("--out", args.out, lambda: result.model.save(args.out))  # whole or not at all
    except UsageError as e:
        say_error("rat-calibrate", e)
        return 2
    skipped.update(result.errors)
    note = _skipped_note(skipped, "not used")
    how = ", ".join(f"{k} {v}" for k, v in result.labels.most_common())
    before = result.before
    done = result.outcome
    print(f"rat-calibrate: {result.queries} labelled outputs ({result.nodes} nodes; labels: {how}): {done} "
          f"-> {args.out}{note}", file=sys.stderr)
    if result.query_kept:
        print(f"rat-calibrate: whole-query calibrator kept ({', '.join(result.query_kept)}): its outputs are all right "
              "or all wrong, and a refit needs both", file=sys.stderr)
    print(f"rat-calibrate: before, on these outputs: mean whole-query confidence {before['query_confidence']:.1%}, "
          f"{result.right_queries / result.queries:.1%} right (whole-query ECE {before['query_ece']:.3f}, "
          f"node ECE {before['node_ece']:.3f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
