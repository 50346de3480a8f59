"""What a row to score may hold, and the check of each field: every reader of rows passes them
(``Scorer.score_many``, ``rat-score``'s files, ``rat-serve``'s and ``rat-mcp``'s requests), so a
field of the wrong type or size is told by its name, before any work, the same way everywhere.

>>> field_problem("db_id", "concert_singer"), field_problem("db_id", "a" * 300)
(None, 'db_id: longer than 128 characters')
>>> field_problem("question", "fine\\ud800")
'question: not valid Unicode text (a lone surrogate at character 4)'
>>> field_problem("db_id", "../x"), field_problem("db_id", ["x"])
('db_id: not a database name', 'db_id: expected a string, found list')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import rat
from model.errors import UsageError

# The bounds of one row, so that every row's cost is bounded (rat-score, rat-serve, rat-mcp):
# BIRD dev's longest gold SQL has 1,446 characters, its largest tree 295 nodes, its longest
# question with its evidence 650 characters. Reading the written SQL's words back onto a tree
# costs more than linear time in its size; the question is matched against every name and value
# the query reads.
MAX_SQL_CHARS = 10_000
MAX_NODES = 500
MAX_QUESTION_CHARS = 4_000
MAX_DB_ID_CHARS = 128  # a folder name under the data root; file systems stop at 255 bytes
MAX_PATH_CHARS = 1024
# The result budget of each database read while scoring (model.data.execution): a query whose
# result would take more is stopped, and scored without its result (model.data.execution.unfinished).
SCORING_RESULT_BYTES = 32 << 20
# the text fields a row may carry; each is echoed back in results and reports
TEXT_FIELDS = ("sql", "question", "evidence", "system", "db_id", "question_id", "database", "gold")
# the fields a row may carry: the text fields and the SQL's dialect (rat.DIALECTS)
ROW_FIELDS = (*TEXT_FIELDS, "dialect")


def unknown_field(given: Iterable[str], known: Sequence[str], kind: str = "field") -> str | None:
    """Why a request is refused for a field (``kind``) it names and nothing reads (a misspelt
    ``databse`` would otherwise be scored as if not given): the first of ``given`` not in
    ``known``, told with the known ones; None when all are known.

    >>> unknown_field(["sql", "databse"], ("sql", "database")), unknown_field(["sql"], ("sql",))
    ("unknown field 'databse' (known: sql, database)", None)
    """
    name = next((k for k in given if k not in known), None)
    return None if name is None else f"unknown {kind} {str(name)[:40]!r} (known: {', '.join(known) or 'none'})"


def misspelt_field(given: Iterable, known: Sequence[str]) -> str | None:
    """Why a row of a Python caller is refused for a field that reads as a misspelling of a known
    one it lacks (another case of it, or a letter off, two in a name of more than five:
    ``databse``, ``Database``, ``dbid``): it would be scored as if that field were not given.
    Other fields are the caller's own, passed over (a DataFrame's records carry their columns):
    one beside the known field it resembles (BIRD's ``SQL`` beside ``sql``), and one that holds
    a known name (``database_id``, ``questions``); None when none is misspelt.

    >>> known = ("sql", "database", "db_id")
    >>> misspelt_field(["sql", "databse", "latency_ms"], known), misspelt_field(["SQL", "id"], known)
    ("'databse': not a field read (did you mean 'database'?)", "'SQL': not a field read (did you mean 'sql'?)")
    >>> misspelt_field(["sql", "SQL", "database_id", "databases", "db_ids", "gold_dialect", "model"], known) is None
    True
    >>> misspelt_field(["sql", "dbid"], known)
    "'dbid': not a field read (did you mean 'db_id'?)"
    """
    given = [name for name in given if isinstance(name, str)]
    present = set(given)
    for name in given:
        low = name.lower()
        if name in known or len(low) > 40:
            continue
        for field in known:
            if field not in present and (low == field or field not in low and low not in field
                                         and abs(len(low) - len(field)) <= 2
                                         and _edits(low, field) <= (1 if len(field) <= 5 else 2)):
                return f"{name[:40]!r}: not a field read (did you mean {field!r}?)"
    return None


def _edits(a: str, b: str) -> int:
    """Levenshtein distance of two short texts.

    >>> _edits("databse", "database"), _edits("dbid", "db_id"), _edits("sql", "gold")
    (1, 1, 3)
    """
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def dialect_name(name: object) -> str:
    """The ``rat.DIALECTS`` name of ``name`` (any case); a ``UsageError`` naming the known ones
    otherwise.

    >>> dialect_name("PostgreS")
    'postgres'
    >>> dialect_name("oracle")
    Traceback (most recent call last):
    ...
    model.errors.UsageError: unknown dialect 'oracle' (known: bigquery, databricks, duckdb, mysql, postgres, redshift, snowflake, sqlite, trino, tsql)
    """
    try:
        return rat.dialects.dialect(name).name
    except (rat.RATError, TypeError) as error:
        raise UsageError(str(error)) from None


def question_problem(name: str, text: str) -> str | None:
    """Why a row's ``question`` or ``evidence`` is not scored (over ``MAX_QUESTION_CHARS``), or None.

    >>> question_problem("question", "How many singers?"), question_problem("evidence", "x" * 4001)
    (None, 'evidence: 4001 characters; at most 4000')
    """
    return f"{name}: {len(text)} characters; at most {MAX_QUESTION_CHARS}" if len(text) > MAX_QUESTION_CHARS else None


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be written back as UTF-8 JSON or used as a file name, or None."""
    if "\x00" in text:
        return f"a NUL character at character {text.index(chr(0))}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"not valid Unicode text (a lone surrogate at character {e.start})"
    return None


def type_problem(name: str, value: Any) -> str | None:
    """Why a row's field ``name`` is of the wrong type, or None: each of ``ROW_FIELDS`` but
    ``database`` is a string where given (``question_id`` an integer too; ``database`` is a path
    in a file or a request, and anything ``Scorer.score`` opens in Python).

    >>> type_problem("db_id", b"x"), type_problem("question_id", 7), type_problem("question_id", True)
    ('db_id: expected a string, found bytes', None, 'question_id: expected a string, found bool')
    """
    if value is None or isinstance(value, str):
        return None
    if name == "question_id" and isinstance(value, int) and not isinstance(value, bool):
        return None
    return f"{name}: expected a string, found {type(value).__name__}"


def field_problem(name: str, value: Any) -> str | None:
    """Why a row's field ``name`` is malformed (one line starting with the name), or None.
    ``db_id``: a plain database name of at most ``MAX_DB_ID_CHARS``; ``question_id``: a string
    or an integer; ``question``, ``evidence``: at most ``MAX_QUESTION_CHARS`` characters;
    ``dialect``: a name in ``rat.DIALECTS`` (any case); the other
    text fields: strings; all: valid Unicode without NUL."""
    if value is None:
        return None
    if problem := type_problem(name, value):
        return problem
    if name == "dialect":
        try:
            dialect_name(value)
        except UsageError as error:
            return f"dialect: {error}"
        return None
    if not isinstance(value, str):  # (a question_id that is an integer)
        return None
    if name == "db_id" and len(value) > MAX_DB_ID_CHARS:
        return f"{name}: longer than {MAX_DB_ID_CHARS} characters"
    if name in ("database", "question_id") and len(value) > MAX_PATH_CHARS:
        return f"{name}: longer than {MAX_PATH_CHARS} characters"
    if name in ("question", "evidence") and (problem := question_problem(name, value)):
        return problem
    problem = text_problem(value)
    if problem:
        return f"{name}: {problem}"
    if name == "db_id" and (not value or "/" in value or "\\" in value or value.startswith(".")
                            or not value.isprintable()):
        return f"{name}: not a database name"
    return None


def row_problem(row: dict) -> str | None:
    """The first malformed field of a row (``field_problem``), or None."""
    for name in ROW_FIELDS:
        problem = field_problem(name, row.get(name))
        if problem:
            return problem
    return None
