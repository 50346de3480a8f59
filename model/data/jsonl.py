"""JSON Lines: the one reader and writer of the project's JSONL files (predictions, scores,
caches), and of its JSON records (metrics, configs). A line that is not JSON is an error naming
the file and the line. ``read_rows`` reads the files of rows ``evaluate.py`` takes (JSONL, JSON,
CSV), counting the rows it leaves out."""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from model.errors import UsageError


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """The objects of a JSONL file, one per non-blank line."""
    path = Path(path)
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON line ({e.msg})") from None


def read_jsonl(path: str | Path) -> list[dict]:
    """All objects of a JSONL file.

    >>> import tempfile, os; p = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> write_jsonl(p, [{"a": 1}, {"b": [2]}]); read_jsonl(p)
    2
    [{'a': 1}, {'b': [2]}]
    """
    return list(iter_jsonl(path))


def write_jsonl(path: str | Path, rows: Iterable[dict], append: bool = False) -> int:
    """Write (or append) one JSON object per line, creating the folder; returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a" if append else "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            n += 1
    return n


def read_json(path: str | Path):
    """One JSON document (a run's metrics or config, a benchmark's questions or schemas); one
    that is not UTF-8 JSON is a ``UsageError`` naming the file."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON ({e.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply") from None


def write_json(path: str | Path, value) -> None:
    """One indented JSON document (metrics, configs of a run), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, default=str))


def read_rows(path: Path, skipped: Counter | None = None) -> list[dict]:
    """Rows of a JSONL, JSON (a list) or CSV file (what ``evaluate.py`` reads); a file that is none
    of these (not UTF-8, not JSON, nested too deeply, a CSV the ``csv`` module refuses, e.g. a
    field over its size limit) is a ``UsageError`` naming it. A JSONL line that is not JSON
    (nested too deeply included), or a row that is not an object, is left out and counted in
    ``skipped``."""
    try:
        return _read_rows(Path(path), skipped if skipped is not None else Counter())
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None


def _read_rows(path: Path, skipped: Counter) -> list[dict]:
    if path.suffix == ".csv":
        try:
            return list(csv.DictReader(path.read_text().splitlines()))
        except csv.Error as e:  # as model.data.predictions reads a CSV: the file, one line
            raise UsageError(f"{path}: not a readable CSV file ({e})") from None
    if path.suffix == ".json":
        rows = read_json(path)
        if not isinstance(rows, list):
            raise UsageError(f"{path}: expected a JSON list of objects")
    else:
        rows = []
        for line in path.read_text(errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except (ValueError, RecursionError):
                skipped["not a JSON line"] += 1
    kept = [r for r in rows if isinstance(r, dict)]
    if len(kept) < len(rows):
        skipped["not an object"] += len(rows) - len(kept)
    return kept


def report_left_out(source: str, n_read: int, skipped: Counter) -> None:
    """One line on stderr: how many rows of ``source`` were left out, by reason."""
    if skipped:
        print(f"{source}: left out {sum(skipped.values())} of {n_read} rows: "
              + ", ".join(f"{n} {why}" for why, n in skipped.items()), file=sys.stderr)
