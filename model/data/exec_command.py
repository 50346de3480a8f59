"""``rat-exec``: execution accuracy of one prediction file, on a benchmark's SQLite databases
(``--root``: ``evaluate_file``) or on your own database (``--database``:
``model.data.execution.evaluate_on_database``, opened read-only by ``model.data.databases``).

    rat-exec --root ../shared/data/spider --split dev --predictions preds.txt
    rat-exec --database postgresql://scorer:pw@localhost/shop --predictions pairs.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from model.data.datasets import database_path, load_questions
from model.data.execution import (
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_TIMEOUT_S,
    default_cache_dir,
    evaluate_on_database,
    execute_pairs,
    sqlite_problem,
    summarize,
)
from model.data.predictions import load_predictions
from model.errors import UsageError, quiet_closed_pipes, say_error


def evaluate_file(
    root: Path,
    split: str,
    predictions: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path | None = None,
    workers: int = 1,
    distinct: bool = False,
    progress: bool = True,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> dict[str, Any]:
    """Execution accuracy of a prediction file over the questions that have a database.

    A question whose prediction row was skipped (see ``load_predictions``) counts as
    ``pred_error``: the system gave no usable SQL for it. A database that cannot be read (corrupt,
    locked) is named in ``unreadable_databases`` and its questions count as without a database,
    as a missing one's do. Unreadable inputs (a missing root or
    split, a malformed questions or prediction file) raise ``OSError`` or ``ValueError`` with a
    one-line message naming the file.
    """
    try:
        questions = load_questions(root, split)
    except UsageError:  # a malformed questions file: one line naming the file and the row
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        # e.g. a questions file that is not a JSON list of objects
        raise ValueError(
            f"{root}: cannot read the {split!r} questions ({type(error).__name__}: {error})"
        ) from None
    skipped: Counter[str] = Counter()
    loaded = load_predictions(predictions, questions, skipped=skipped)
    by_id = {p.question_id: p.sql for p in loaded}
    db_paths = {q.db_id: database_path(root, q.db_id) for q in questions}
    unreadable = {db: problem for db, path in db_paths.items()
                  if path is not None and (problem := sqlite_problem(path, timeout_s)) is not None}
    db_paths.update(dict.fromkeys(unreadable))  # their questions count as without a database
    pairs = [(db_paths[q.db_id], by_id.get(q.question_id, ""), q.gold_sql) for q in questions]
    outcomes = execute_pairs(
        pairs, timeout_s, cache_dir, workers, distinct, progress, max_result_bytes
    )
    counts = summarize(outcomes)
    with_database = len(outcomes) - counts["no_database"]
    return {
        "predictions": str(predictions),
        "questions": len(questions),
        "with_database": with_database,
        "execution_accuracy": counts["match"] / with_database if with_database else None,
        "outcomes": counts,
        "skipped_rows": dict(skipped),
        "missing_databases": sorted(db for db, path in db_paths.items() if path is None and db not in unreadable),
        "unreadable_databases": dict(sorted(unreadable.items())),
    }


def _evaluate_on(args) -> dict[str, Any]:
    """``rat-exec --database``: ``evaluate_on_database`` with the command's options, checked."""
    from model.data.databases import open_database
    from model.errors import UsageError
    from rat import RATError
    from rat.dialects import dialect

    try:
        if args.dialect is not None:
            dialect(args.dialect)
    except RATError as error:
        raise UsageError(f"--dialect: {str(error).splitlines()[0]}") from None
    if args.distinct:
        raise UsageError("--distinct is for --root: --database runs both queries as written, DISTINCT kept")
    with open_database(args.database, timeout_s=args.timeout,
                       max_result_bytes=int(args.max_result_mb * 2**20)) as database:
        return evaluate_on_database(database, args.predictions, args.dialect, progress=not args.no_progress)


def _usage_problem(args) -> str | None:
    """What is wrong with the command line, in one line naming the option, or None."""
    for option, value in (("--timeout", args.timeout), ("--max-result-mb", args.max_result_mb),
                          ("--workers", args.workers)):
        if not (math.isfinite(value) and value > 0):  # nan would switch the timeout off
            return f"{option} {value:g}: must be a positive number"
    cores = _usable_cores()
    if args.workers > cores:  # queries are CPU-bound: more processes only share the same cores
        return f"--workers {args.workers}: at most {cores} (the CPU cores this process may use)"
    if args.database is not None and not args.database.strip():
        return "--database: empty (give a database URL or file)"
    if args.root is not None and args.dialect is not None:
        return "--dialect is for --database: --root runs the predictions as SQLite, as the benchmark's gold"
    if not args.predictions.exists():  # (a pipe, <(...), exists and is read)
        return f"--predictions {args.predictions}: no such file"
    if args.predictions.is_dir():
        return f"--predictions {args.predictions}: a folder, not a file"
    return None


def _usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@quiet_closed_pipes()
def main(argv: list[str] | None = None) -> int:
    """``rat-exec``: execution accuracy of one prediction file."""
    parser = argparse.ArgumentParser(prog="rat-exec", description=main.__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", type=Path, help="dataset folder (Spider or BIRD format)")
    where.add_argument("--database", metavar="URL_OR_FILE",
                       help="your own database (read-only: a PostgreSQL / MySQL URL, a DuckDB or SQLite "
                            "file): --predictions rows {sql, gold} run there")
    parser.add_argument("--dialect", help="with --database: the SQL dialect of rows without their own "
                                          "(default: the database's)")
    parser.add_argument("--split", default="dev")
    parser.add_argument(
        "--predictions", type=Path, required=True, help=".txt, .csv, .json or .jsonl"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes running the queries, at most the CPU cores (and the distinct queries)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per query"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help=f"default {default_cache_dir()}"
    )
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument(
        "--distinct", action="store_true",
        help="with --root: keep DISTINCT (test-suite removes it; --database keeps it always)"
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--max-result-mb",
        type=float,
        default=DEFAULT_MAX_RESULT_BYTES / 2**20,
        help="refuse a query result past this estimated size in MiB (memory guard)",
    )
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem is not None:
        say_error("rat-exec", problem)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    try:
        if args.database is not None:
            report = _evaluate_on(args)
        else:
            report = evaluate_file(
                args.root,
                args.split,
                args.predictions,
                args.timeout,
                cache_dir,
                args.workers,
                args.distinct,
                progress=not args.no_progress,
                max_result_bytes=int(args.max_result_mb * 2**20),
            )
    except (OSError, ValueError, sqlite3.Error) as error:
        # Bad input files, a missing root, an unusable cache: one line, no traceback.
        message = " ".join(str(error).split()) or type(error).__name__
        if isinstance(error, sqlite3.Error):  # only the cache is opened outside _run
            message = f"execution cache {cache_dir}: {message}"
        say_error("rat-exec", message)
        return 2
    if args.json:
        print(json.dumps(report))
        return 0
    accuracy = report["execution_accuracy"]
    counts = report["outcomes"]
    print(
        f"{args.predictions}: {report['questions']} questions, {report['with_database']} with a database"
        if args.database is None else f"{args.predictions}: {report['questions']} pairs on {report['database']}, "
        f"{report['with_database']} whose gold runs there"
    )
    if accuracy is None:
        print("execution accuracy: n/a (" + ("no gold query runs there)" if args.database is not None else
                                             "no question has a database)"))
    else:
        print(
            f"execution accuracy: {100 * accuracy:.1f}% ({counts['match']}/{report['with_database']})"
        )
    print("outcomes: " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    if report["skipped_rows"]:
        print(
            "skipped prediction rows: "
            + ", ".join(f"{k} {v}" for k, v in report["skipped_rows"].items())
        )
    if report.get("missing_databases"):
        print("missing databases: " + ", ".join(report["missing_databases"]))
    for db, problem in report.get("unreadable_databases", {}).items():
        print(f"unreadable database: {db} ({problem}); its questions are counted as without a database")
    return 0


if __name__ == "__main__":
    sys.exit(main())
