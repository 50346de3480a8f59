"""JSON Lines: the one reader and writer of the project's JSONL files (predictions, scores,
caches), and of its JSON records (metrics, configs). In the project's own files a line that is
not JSON is an error naming the file and the line (``iter_jsonl``); in a user's file it is a row
left out and counted (``read_objects``, the one reader of users' JSONL rows: ``rat-score``,
``rat-exec``, training's prediction files). ``read_rows`` reads the files of rows
``evaluate.py`` takes (JSONL, JSON, CSV), counting the rows it leaves out."""

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


def read_objects(path: str | Path, skipped: Counter) -> list[dict]:
    """The objects of a user's JSONL file; a line that is not UTF-8, not JSON (nested too
    deeply included) or not an object is left out and counted in ``skipped`` under those words.
    Lines end at "\\n" only (a JSON string may hold U+2028, which ``str.splitlines`` splits
    at); a byte-order mark is no part of the first line. A file that cannot be read raises
    ``OSError``.

    >>> import tempfile, os; p = os.path.join(tempfile.mkdtemp(), "a.jsonl"); skipped = Counter()
    >>> _ = open(p, "wb").write(b'\\xef\\xbb\\xbf{"sql": "SELECT \\xe2\\x80\\xa8 1"}\\n[1]\\n{\\n\\xff\\n\\n')
    >>> read_objects(p, skipped), dict(skipped)
    ([{'sql': 'SELECT \\u2028 1'}], {'not an object': 1, 'not a JSON line': 1, 'not UTF-8': 1})
    """
    rows = []
    for line in Path(path).read_bytes().removeprefix(b"\xef\xbb\xbf").split(b"\n"):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            skipped["not UTF-8"] += 1
            continue
        except (ValueError, RecursionError):
            skipped["not a JSON line"] += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            skipped["not an object"] += 1
    return rows


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
        return json.loads(path.read_text(encoding="utf-8-sig"))  # (a byte-order mark is no part of it)
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
            with path.open(newline="", encoding="utf-8-sig") as f:  # (quoted fields may hold line breaks)
                return list(csv.DictReader(f))
        except csv.Error as e:  # as model.data.predictions reads a CSV: the file, one line
            raise UsageError(f"{path}: not a readable CSV file ({e})") from None
    if path.suffix == ".json":
        rows = read_json(path)
        if not isinstance(rows, list):
            raise UsageError(f"{path}: expected a JSON list of objects")
    else:
        return read_objects(path, skipped)
    kept = [r for r in rows if isinstance(r, dict)]
    if len(kept) < len(rows):
        skipped["not an object"] += len(rows) - len(kept)
    return kept


def report_left_out(source: str, n_read: int, skipped: Counter) -> None:
    """One line on stderr: how many rows of ``source`` were left out, by reason."""
    if skipped:
        print(f"{source}: left out {sum(skipped.values())} of {n_read} rows: "
              + ", ".join(f"{n} {why}" for why, n in skipped.items()), file=sys.stderr)
