"""JSON Lines: the one reader and writer of the project's JSONL files (predictions, scores,
caches), and of its JSON records (metrics, configs). In the project's own files a line that is
not JSON is an error naming the file and the line (``iter_jsonl``); in a user's file it is a row
left out and counted (``read_objects``, the one reader of users' JSONL rows: ``rat-score``,
``rat-exec``, training's prediction files). ``read_rows`` reads the files of rows
``evaluate.py`` takes (JSONL, JSON, CSV), counting the rows it leaves out."""

from __future__ import annotations

import csv
import json
import os
import stat
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


MAX_LINE_BYTES = 16 << 20  # a longer line of a user's JSONL file is left out, counted


def read_objects(path: str | Path, skipped: Counter) -> list[dict]:
    """The objects of a user's JSONL file; a line that is not UTF-8, not JSON (nested too
    deeply included) or not an object is left out and counted in ``skipped`` under those words.
    Lines end at "\\n" only (a JSON string may hold U+2028, which ``str.splitlines`` splits
    at); a byte-order mark is no part of the first line. The file is read a line at a time, and
    a line over ``MAX_LINE_BYTES`` (16 MiB) is passed over, counted, not held. A file that cannot
    be read raises ``OSError``.

    >>> import tempfile, os; p = os.path.join(tempfile.mkdtemp(), "a.jsonl"); skipped = Counter()
    >>> _ = open(p, "wb").write(b'\\xef\\xbb\\xbf{"sql": "SELECT \\xe2\\x80\\xa8 1"}\\n[1]\\n{\\n\\xff\\n\\n')
    >>> read_objects(p, skipped), dict(skipped)
    ([{'sql': 'SELECT \\u2028 1'}], {'not an object': 1, 'not a JSON line': 1, 'not UTF-8': 1})
    """
    rows = []
    with Path(path).open("rb") as f:  # (read a line at a time: a binary file's lines end at b"\n" only)
        # (room for a byte-order mark or a line end beside the line's own MAX_LINE_BYTES)
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 4), b"")):
            line = line.removeprefix(b"\xef\xbb\xbf") if number == 0 else line
            if len(line.rstrip(b"\r\n")) > MAX_LINE_BYTES:  # its bytes passed over, never held
                while line and not line.endswith(b"\n"):
                    line = f.readline(MAX_LINE_BYTES)
                skipped[f"a line over {MAX_LINE_BYTES >> 20} MiB"] += 1
                continue
            row = _object(line, skipped)
            if row is not None:
                rows.append(row)
    return rows


def _object(line: bytes, skipped: Counter) -> dict | None:
    """One JSONL line's object, or None (a blank line; a line left out, counted in ``skipped``)."""
    if not line.strip():
        return None
    try:
        row = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        skipped["not UTF-8"] += 1
        return None
    except (ValueError, RecursionError):
        skipped["not a JSON line"] += 1
        return None
    if isinstance(row, dict):
        return row
    skipped["not an object"] += 1
    return None


def write_jsonl(path: str | Path, rows: Iterable[dict], append: bool = False) -> int:
    """Write (or append) one JSON object per line, creating the folder; returns the count. A new
    file is written whole or not at all: into a temporary file beside it, put in its place at the
    end, so a write that fails (a full disk, an interrupt) leaves the old file as it was and no
    partial one. A link, or a path that is not a regular file (``/dev/stdout``, a pipe), is
    written through, as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if append or path.is_symlink() or (path.exists() and not path.is_file()):
        with path.open("a" if append else "w") as f:
            return _write_lines(f, rows)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w") as f:
            n = _write_lines(f, rows)
        if path.exists():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return n


def _write_lines(f, rows: Iterable[dict]) -> int:
    n = 0
    for row in rows:
        f.write(json.dumps(row) + "\n")
        n += 1
    return n


def read_json(path: str | Path):
    """One JSON document (a run's metrics or config, a model's card, a benchmark's questions or
    schemas, a prediction file); one that is not UTF-8 JSON this project can read (nested too
    deeply, a number of more digits than Python converts) is a ``UsageError``, one line naming
    the file. (A file that cannot be opened raises ``OSError``.)

    >>> import tempfile, os; p = os.path.join(tempfile.mkdtemp(), "a.json")
    >>> _ = open(p, "w").write('{"a": ' + "9" * 5000 + "}")
    >>> try:
    ...     read_json(p)
    ... except UsageError as e:
    ...     print(str(e).removeprefix(p))
    : not JSON this project can read (Exceeds the limit (4300 digits) for integer string conversion)
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))  # (a byte-order mark is no part of it)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON ({e.msg})") from None
    except ValueError as e:  # (a number of more digits than int() converts: "Exceeds the limit ...: value has")
        raise UsageError(f"{path}: not JSON this project can read ({str(e).split(':')[0][:120]})") from None
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
        return _read_csv(path, skipped)
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


class _Lines:
    """An iterator over ``lines`` from index ``at`` on: setting ``at`` back reads them again."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.at = lines, 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self.at >= len(self.lines):
            raise StopIteration
        self.at += 1
        return self.lines[self.at - 1]


def _read_csv(path: Path, skipped: Counter) -> list[dict]:
    """A CSV file's rows (``csv.DictReader``'s). A record whose quoting the ``csv`` module refuses
    in its strict mode (a quote never closed, which would swallow the rest of the file; a closing
    quote followed by more of the field) is left out and counted, and reading goes on at the line
    after the one that record began on; a field over the ``csv`` module's size limit refuses the
    file (a ``UsageError`` naming it).

    >>> import tempfile, os; p = os.path.join(tempfile.mkdtemp(), "a.csv"); skipped = Counter()
    >>> _ = open(p, "w").write('a,b\\n1,"x\\ny"\\n"2,3\\n4,5\\n')
    >>> _read_csv(Path(p), skipped), dict(skipped)
    ([{'a': '1', 'b': 'x\\ny'}, {'a': '4', 'b': '5'}], {'bad CSV quoting (line 4)': 1})
    """
    with path.open(newline="", encoding="utf-8-sig") as f:  # (quoted fields may hold line breaks)
        lines = _Lines(f.readlines())
    reader = csv.DictReader(lines, strict=True)
    rows, bad = [], []
    while True:
        start = lines.at
        try:
            rows.append(next(reader))
        except StopIteration:
            break
        except csv.Error as e:
            if "field limit" in str(e):  # as model.data.predictions reads a CSV: the file, one line
                raise UsageError(f"{path}: not a readable CSV file ({e})") from None
            while start < len(lines.lines) - 1 and not lines.lines[start].strip("\r\n"):
                start += 1  # (blank lines the reader passed over)
            bad.append(start + 1)
            lines.at = start + 1
    if bad:
        skipped[f"bad CSV quoting (line {bad[0]}{' and others' if len(bad) > 1 else ''})"] += len(bad)
    return rows


def report_left_out(source: str, n_read: int, skipped: Counter) -> None:
    """One line on stderr: how many rows of ``source`` were left out, by reason."""
    if skipped:
        print(f"{source}: left out {sum(skipped.values())} of {n_read} rows: "
              + ", ".join(f"{n} {why}" for why, n in skipped.items()), file=sys.stderr)
