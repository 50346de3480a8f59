"""Predicted SQL of real text-to-SQL systems, read from the formats they publish.

Formats, chosen by file extension:

- ``.txt``: one SQL a line in question order, with or without a trailing ``;`` and with or
  without a trailing ``<TAB>db_id`` (the Spider/test-suite convention). Only a last TAB field
  that names a database of the questions is split off: any other TAB is part of the SQL.
- ``.csv``: the DIN-SQL release, header ``NLQ,PREDICTED SQL,GOLD SQL,DATABASE``; fields may hold
  commas and newlines, so it is read with the ``csv`` module.
- ``.json``: the CodeS BIRD release, ``{"0": "<SQL>\\t----- bird -----\\t<db_id>", ...}``.
- ``.jsonl``: this project's own format, one JSON object a line::

      {"question_id": "dev_0", "db_id": "concert_singer", "sql": "SELECT count(*) FROM singer",
       "samples": ["SELECT count(*) FROM singers", "..."]}

  ``question_id`` is :class:`model.data.datasets.Question`'s id; ``db_id`` (optional) is checked
  against the question's; ``sql`` is the system's answer; ``samples`` (optional) are other
  outputs of the same system for the same question (beams, temperature samples), used by the
  whole-query confidence scores. Rows may come in any order.

Positional formats (.txt, .csv, .json) must have exactly one row per question; a different row
count is a ``ValueError`` naming the file and both counts, because a shifted file silently pairs
every prediction with the wrong question. Individual bad rows (a db_id that disagrees with the
question's, a JSONL line that is not JSON or lacks ``sql``, an unknown or repeated question id, a
``question`` text, where a row has one, that is not its id's question) are skipped and counted per
reason in ``skipped``; a warning line says which ids the split has where a row names another,
and by how much the ids look shifted where many rows carry another id's question.

A file that cannot be read as its format says (not UTF-8, not JSON, a JSON value of the wrong
shape, a broken CSV) raises :class:`PredictionFileError`, a ``ValueError`` whose one-line
message names the file, so that command-line tools can print it and exit.
"""

from __future__ import annotations

import csv
import glob
import json
import logging
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from model.data.cache import REPO
from model.data.datasets import Question
from model.data.jsonl import read_json, read_objects

__all__ = ["Prediction", "PredictionFileError", "glob_files", "load_predictions", "prediction_files",
           "write_predictions"]

log = logging.getLogger(__name__)

_BIRD_SEPARATOR = "\t----- bird -----\t"


from model.errors import PredictionFileError, UsageError


def prediction_files(root: Path, spec: str | Path | list | tuple | None, default: bool = True) -> list[Path]:
    """The files of ``spec`` (globs); ``None``: ``<root>/predictions/*`` (with ``default``) or none.

    A relative glob is read from the current folder and, where it matches nothing there, from
    the repository's root (the committed answers of ``data/llm_answers/``); a glob that matches
    nothing is a ``UsageError`` naming it, as are a folder and two files of one name (a file's
    name, without its suffix, names its system: ``a/sys.jsonl`` and ``b/sys.jsonl`` would be one
    system)."""
    from model.errors import UsageError  # one line for the user, not a traceback

    if spec is None:
        files = sorted(p for p in (root / "predictions").glob("*") if p.is_file()) if default else []
    else:
        specs = [spec] if isinstance(spec, (str, Path)) else list(spec)
        found = {s: glob_files(s) for s in specs}
        missing = [s for s, files in found.items() if not files]
        if missing:
            relative = any(not Path(s).expanduser().is_absolute() for s in missing)
            raise UsageError(f"prediction files not found: {missing}" + (
                f" (a relative path is read from the current folder, {Path.cwd()}, then from the "
                f"repository's, {REPO})" if relative else ""))
        files = list(dict.fromkeys(f for files in found.values() for f in files))
        folder = next((f for f in files if f.is_dir()), None)
        if folder is not None:  # (read as a file, its empty suffix would be an unknown format)
            raise UsageError(f"prediction files: {folder} is a folder; name its files ({folder / '*.jsonl'})")
    named: dict[str, Path] = {}
    for path in files:
        if path.stem in named:
            raise UsageError(f"prediction files {named[path.stem]} and {path}: one system name, {path.stem!r}, "
                             "for two files (a file's name names its system): rename one")
        named[path.stem] = path
    return files


def glob_files(spec: str | Path) -> list[Path]:
    """The files a prediction glob names: from the current folder, else (a relative glob that
    matches nothing there) from the repository's root.

    >>> [p.name for p in glob_files("data/llm_answers/spider_train/*.jsonl")]
    ['qwen_coder.jsonl']
    """
    pattern = Path(spec).expanduser()
    files = sorted(glob.glob(str(pattern)))
    if not files and not pattern.is_absolute():
        files = sorted(glob.glob(str(REPO / pattern)))
    return [Path(f) for f in files]


@dataclass(frozen=True)
class Prediction:
    """One system's predicted SQL for one question."""

    question_id: str
    db_id: str
    sql: str
    system: str  # e.g. "codes_7b" (file stem by default)
    samples: tuple[str, ...] = ()  # other outputs for the same question, if the system gave any


def load_predictions(
    path: Path,
    questions: list[Question],
    system: str | None = None,
    skipped: Counter[str] | None = None,
    allow_partial: bool = False,
) -> list[Prediction]:
    """The predictions in ``path`` for ``questions``, in question order, bad rows skipped.

    ``skipped`` (if given) is incremented with the number of skipped rows per reason.
    ``allow_partial``: an id-keyed ``.jsonl`` file may cover only some of the questions (e.g. SPLASH's
    parser outputs on part of Spider train); positional formats always need one row per question.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "toy.txt"
    >>> _ = path.write_text("SELECT 1;\\nselect name from t\\tshop\\n")
    >>> qs = [Question(f"dev_{i}", "shop", "q", "SELECT 1") for i in range(2)]
    >>> [p.sql for p in load_predictions(path, qs)]
    ['SELECT 1;', 'select name from t']
    """
    path = Path(path)
    system = system or path.stem
    reasons: Counter[str] = Counter()
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        predictions = _from_jsonl(path, questions, system, reasons, allow_partial)
    else:
        txt = partial(_rows_txt, db_ids={q.db_id for q in questions})
        readers = {".txt": txt, ".sql": txt, ".csv": _rows_csv, ".json": _rows_json}
        if suffix not in readers:
            raise PredictionFileError(
                path, f"unknown prediction format {suffix!r} ({' '.join([*readers, '.jsonl'])})"
            )
        rows = readers[suffix](path)
        if len(rows) != len(questions):
            raise PredictionFileError(
                path,
                f"{len(rows)} predictions but {len(questions)} questions; "
                "a positional prediction file needs exactly one row per question",
            )
        predictions = []
        for question, (sql, db_id) in zip(questions, rows, strict=True):
            if db_id is not None and db_id != question.db_id:
                reasons["db_id not its question's"] += 1
                continue
            predictions.append(Prediction(question.question_id, question.db_id, sql, system))
    if reasons:
        log.warning("%s: skipped %s", path, dict(reasons))
    if skipped is not None:
        skipped.update(reasons)
    return predictions


def write_predictions(path: Path, predictions: list[Prediction]) -> None:
    """Write ``predictions`` in this project's JSONL format (the inverse of ``load_predictions``)."""
    with Path(path).open("w", encoding="utf-8") as out:
        for p in predictions:
            row: dict[str, Any] = {"question_id": p.question_id, "db_id": p.db_id, "sql": p.sql}
            if p.samples:
                row["samples"] = list(p.samples)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


# Each positional reader returns [(sql, db_id or None)] in file order.


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # (a byte-order mark is no part of the first row)
    except UnicodeDecodeError as error:
        raise PredictionFileError(path, f"not UTF-8 text ({error})") from None


def _rows_txt(path: Path, db_ids: set[str]) -> list[tuple[str, str | None]]:
    """Rows of a .txt file; a last TAB field is a db_id only when it names one of ``db_ids``
    (a TAB inside the SQL stays there).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "p.txt"
    >>> _ = path.write_text("SELECT a\\tFROM t\\tshop\\nSELECT a FROM\\tt\\n")
    >>> _rows_txt(path, {"shop"})
    [('SELECT a\\tFROM t', 'shop'), ('SELECT a FROM\\tt', None)]
    """
    lines = _read_text(path).split("\n")
    while lines and not lines[-1].strip():  # the final newline, and blank lines after it
        lines.pop()
    rows = []
    for line in lines:
        line = line.rstrip("\r")
        sql, tab, last = line.rpartition("\t")
        if tab and last.strip() in db_ids:
            rows.append((sql.strip(), last.strip()))
        else:
            rows.append((line.strip(), None))
    return rows


def _rows_csv(path: Path) -> list[tuple[str, str | None]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            fields = set(reader.fieldnames or ())
            if not {"PREDICTED SQL", "DATABASE"} <= fields:
                raise PredictionFileError(
                    path, f"expected columns PREDICTED SQL and DATABASE, found {sorted(fields)}"
                )
            return [
                ((row["PREDICTED SQL"] or "").strip(), (row["DATABASE"] or "").strip() or None)
                for row in reader
            ]
    except UnicodeDecodeError as error:
        raise PredictionFileError(path, f"not UTF-8 text ({error})") from None
    except csv.Error as error:
        raise PredictionFileError(path, f"not a readable CSV file ({error})") from None


def _rows_json(path: Path) -> list[tuple[str, str | None]]:
    try:
        data = read_json(path)  # the one JSON reader; its one-line errors, as this file's
    except UsageError as error:
        raise PredictionFileError(path, str(error).removeprefix(f"{path}: ")) from None
    if isinstance(data, list):
        items = [(str(i), value) for i, value in enumerate(data)]
    elif isinstance(data, dict):
        numbers = {}
        for key in data:
            try:
                numbers[key] = int(key)
            except ValueError:
                raise PredictionFileError(
                    path, f"expected question numbers as keys (\"0\", \"1\", ...), found {key!r}"
                ) from None
        # positional: the keys must number the questions 0..n-1, each once (a gap shifts the rest)
        given = set(numbers.values())
        gap = next((k for k in range(len(data)) if k not in given), None)
        if gap is not None:
            raise PredictionFileError(
                path, f"question numbers as keys must run from 0 to {len(data) - 1}; {gap} is missing"
            )
        items = sorted(data.items(), key=lambda item: numbers[item[0]])
    else:
        raise PredictionFileError(
            path,
            f"expected an object {{\"0\": SQL, ...}} or a list of SQL, found "
            f"{json.dumps(data)[:40]}",
        )
    rows = []
    for key, value in items:
        if not isinstance(value, str):
            raise PredictionFileError(
                path, f"prediction {key} is {type(value).__name__}, expected a string of SQL"
            )
        sql, sep, db_id = value.partition(_BIRD_SEPARATOR)
        rows.append((sql.strip(), db_id.strip() if sep else None))
    return rows


QUESTION_MISMATCH = "question not its question_id's"


def question_of(row: dict, by_id: dict[str, Question]) -> tuple[Question | None, str | None]:
    """The benchmark question a row names by ``question_id`` (None where it names none), or why
    the row cannot be read as that question's: ``unknown question_id``, ``question not its
    question_id's`` (a row's ``question`` text, where given, must be the one its id names, as
    ``same_question`` compares them: else its ids are likely shifted, and every output would be
    labelled against another question's gold), ``db_id not its question's`` (a row's ``db_id``,
    where given, must be its question's). The one check of a row against its question, for
    every reader of rows (training's, ``rat-exec``'s, ``rat-score``'s).

    >>> by_id = {"dev_0": Question("dev_0", "shop", "How many?", "SELECT 1")}
    >>> [question_of(row, by_id)[1] for row in ({"question_id": "dev_0"}, {"question_id": "dev_9"},
    ...                                          {"question_id": "dev_0", "db_id": "pets"}, {},
    ...                                          {"question_id": "dev_0", "question": "how  many ?"},
    ...                                          {"question_id": "dev_0", "question": "Which ones?"})]
    [None, 'unknown question_id', "db_id not its question's", None, None, "question not its question_id's"]
    """
    if row.get("question_id") is None:
        return None, None
    question = by_id.get(str(row["question_id"]))
    if question is None:
        return None, "unknown question_id"
    text = row.get("question")
    if isinstance(text, str) and text.strip() and not same_question(text, question):
        return None, QUESTION_MISMATCH
    if row.get("db_id") not in (None, question.db_id):
        return None, "db_id not its question's"
    return question, None


def _question_key(text: str) -> str:
    """A question's text as ``same_question`` compares it: Unicode-normalised (NFKC), Spider's
    tokenised quotes (`` and '') as ``"``, without whitespace, case-folded."""
    import unicodedata

    text = unicodedata.normalize("NFKC", text).replace("``", '"').replace("''", '"')
    return "".join(text.split()).casefold()


def same_question(text: str, question: Question) -> bool:
    """Whether a row's ``question`` text is ``question``'s: the same but for case and whitespace
    (Spider's tokenised ``question_toks`` joined with spaces are), or, for BIRD, the question with
    its evidence appended (``question_text``: what the features read).

    >>> q = Question("dev_0", "schools", "How many schools?", "SELECT 1", evidence="school = 'x'")
    >>> [same_question(t, q) for t in ("how many schools ?", "How many schools? school = 'x'", "How many?")]
    [True, True, False]
    """
    from model.data.datasets import question_text

    return _question_key(text) in {_question_key(question.question),
                                   _question_key(question_text(question.question, question.evidence))}


def id_ranges(questions: list[Question]) -> str:
    """The question ids of ``questions`` as ranges: ``dev_0 .. dev_212`` (``<file>_<index>``, one
    range a benchmark file).

    >>> id_ranges([Question(f"dev_{i}", "s", "q", "") for i in range(3)])
    'dev_0 .. dev_2'
    """
    ranges: list[list[str]] = []
    for q in questions:
        prefix = q.question_id.rpartition("_")[0]
        if ranges and ranges[-1][0].rpartition("_")[0] == prefix:
            ranges[-1][1] = q.question_id
        else:
            ranges.append([q.question_id, q.question_id])
    return ", ".join(first if first == last else f"{first} .. {last}" for first, last in ranges)


def _id_hints(path: Path, questions: list[Question], unknown: list[str], mismatched: list[tuple[str, str]],
              n_rows: int) -> None:
    """One warning line each for rows whose ids the split does not have (``unknown``, the ids) and
    for many rows whose question text is another question's (``mismatched``: (id, text) pairs):
    what the ids are, and by how much they look shifted where they are."""
    scheme = ("ids are <file>_<index>, the split's questions in file order from 0 "
              "(dev_0: dev.json's first)")
    if unknown:
        log.warning("%s: %d row(s) name a question_id the split does not have (e.g. %r); expected %s: %s",
                    path, len(unknown), unknown[0], id_ranges(questions), scheme)
    if not mismatched or len(mismatched) < max(3, 0.1 * n_rows):
        return
    position = {q.question_id: i for i, q in enumerate(questions)}
    where: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        for text in {_question_key(q.question), _question_key(f"{q.question} {q.evidence}")}:
            where.setdefault(text, []).append(i)
    shifts: Counter[int] = Counter()
    for qid, text in mismatched:
        found = where.get(_question_key(text))
        if found:
            shifts[min((position[qid] - i for i in found), key=abs)] += 1
    shift, n = shifts.most_common(1)[0] if shifts else (0, 0)
    if shift and n >= 0.8 * len(mismatched):
        example = next(qid for qid, text in mismatched if position[qid] - shift in where.get(_question_key(text), ()))
        said = (f"the ids look shifted by {shift:+d} (the row named {example} asks "
                f"{questions[position[example] - shift].question_id}'s question)")
    else:
        said = "are the ids shifted, or another numbering?"
    log.warning("%s: %d of %d rows carry a question that is not the one their question_id names; %s: %s",
                path, len(mismatched), n_rows, said, scheme)


def _from_jsonl(
    path: Path, questions: list[Question], system: str, reasons: Counter[str], allow_partial: bool = False
) -> list[Prediction]:
    by_id = {q.question_id: q for q in questions}
    found: dict[str, Prediction] = {}
    rows = read_objects(path, reasons)
    n_rows = len(rows) + sum(reasons.values())  # (the lines read, each a row of the file)
    unknown, mismatched = [], []
    for row in rows:
        if not isinstance(row.get("sql"), str) or row.get("question_id") is None:
            reasons["no question_id or sql (a string)"] += 1
            continue
        question, problem = question_of(row, by_id)
        if problem:
            reasons[problem] += 1
            if problem == "unknown question_id":
                unknown.append(str(row["question_id"]))
            elif problem == QUESTION_MISMATCH:
                mismatched.append((str(row["question_id"]), row["question"]))
            continue
        if question.question_id in found:
            reasons["duplicate question_id"] += 1
            continue
        samples = row.get("samples") or ()
        if not isinstance(samples, list | tuple) or not all(
            isinstance(s, str) for s in samples
        ):
            reasons["samples not a list of strings (read as none)"] += 1
            samples = ()
        found[question.question_id] = Prediction(
            question.question_id, question.db_id, row["sql"].strip(), system, tuple(samples)
        )
    _id_hints(path, questions, unknown, mismatched, n_rows)
    if n_rows != len(questions) and not (allow_partial and n_rows <= len(questions)):
        raise PredictionFileError(
            path,
            f"{n_rows} predictions but {len(questions)} questions; "
            "a prediction file needs exactly one row per question",
        )
    return [found[q.question_id] for q in questions if q.question_id in found]
