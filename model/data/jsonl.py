"""JSON Lines: the one reader and writer of the project's JSONL files (predictions, scores,
caches), and of its JSON records (metrics, configs). A line that is not JSON is an error naming
the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path


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
    """One JSON document (a run's metrics or config); not JSON is an error naming the file."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e.msg})") from None


def write_json(path: str | Path, value) -> None:
    """One indented JSON document (metrics, configs of a run), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, default=str))
