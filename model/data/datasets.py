"""Questions, schemas and database paths of Spider- and BIRD-format datasets under a root folder.

Spider layout: ``dev.json``, ``train_spider.json``, ``train_others.json``, ``tables.json``,
``database/<db_id>/<db_id>.sqlite``. BIRD layout (detected by ``dev_tables.json``): ``dev.json``
with ``SQL``/``evidence``/``difficulty``, ``dev_tables.json``, ``dev_databases/<db_id>/<db_id>.sqlite``.
Official releases: Spider https://yale-lily.github.io/spider, BIRD https://bird-bench.github.io/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.data.jsonl import read_json
from model.errors import UsageError

if TYPE_CHECKING:  # rat is only needed by load_schemas; keep importing this module cheap
    import rat

__all__ = [
    "Question",
    "database_path",
    "is_bird",
    "load_questions",
    "load_schemas",
    "own_databases",
    "question_text",
    "spider_hardness",
]


@dataclass(frozen=True)
class Question:
    """One natural-language question with its gold SQL.

    ``question_id`` is ``f"{file_stem}_{index}"`` (``dev_0``, ``train_spider_12``): stable whichever
    split name loaded it, so predictions and examples can be joined on it.
    """

    question_id: str
    db_id: str
    question: str
    gold_sql: str
    evidence: str = ""  # BIRD's external-knowledge hint; "" for Spider
    difficulty: str | None = None  # Spider hardness (easy/medium/hard/extra) or BIRD difficulty


def question_text(question: str, evidence: str = "") -> str:
    """The question as the node features read it: BIRD's evidence (the external knowledge that
    names columns and values) appended when there is one.

    >>> question_text("How many schools in Alameda?", "Alameda refers to County = 'Alameda'")
    "How many schools in Alameda? Alameda refers to County = 'Alameda'"
    """
    return f"{question} {evidence}".strip() if evidence else question


def is_bird(root: Path) -> bool:
    """BIRD-format roots are recognised by their ``dev_tables.json``."""
    return (Path(root) / "dev_tables.json").exists()


def _split_files(root: Path, split: str) -> list[Path]:
    """The JSON files that make up ``split``; ``train`` falls back to Spider's two train files."""
    single = root / f"{split}.json"
    if single.exists():
        return [single]
    if split == "train" and not is_bird(root):
        parts = [root / "train_spider.json", root / "train_others.json"]
        if all(p.exists() for p in parts):
            return parts
    raise FileNotFoundError(
        f"no questions for split {split!r} under {root} (looked for {single.name})"
    )


def load_questions(root: Path, split: str) -> list[Question]:
    """All questions of ``split`` ("dev", "train_spider", "train_others", "train") in file order.

    >>> import tempfile, json
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "dev.json").write_text(json.dumps(
    ...     [{"db_id": "shop", "question": "How many?", "query": "SELECT count(*) FROM t"}]))
    >>> load_questions(root, "dev")[0]
    Question(question_id='dev_0', db_id='shop', question='How many?', gold_sql='SELECT count(*) FROM t', evidence='', difficulty=None)
    """
    root = Path(root)
    questions: list[Question] = []
    for path in _split_files(root, split):
        rows = read_json(path)
        if not isinstance(rows, list):
            raise UsageError(f"{path}: expected a JSON list of questions, found {type(rows).__name__}")
        for index, row in enumerate(rows):
            questions.append(_question(row, f"{path.stem}_{index}", path))
    return questions


def _question(row: dict[str, Any], question_id: str, path: Path) -> Question:
    """One question of a benchmark file; a row of the wrong shape is a ``UsageError`` naming it.
    A benchmark file is read whole or not at all: prediction files are aligned to its questions
    by position, so a question left out would shift them."""
    if not isinstance(row, dict):
        raise UsageError(f"{path}: row {question_id} is not an object")
    odd = next((k for k in ("db_id", "question", "query", "SQL", "evidence") if k in row
                and not isinstance(row[k], str) and not (k == "evidence" and row[k] is None)), None)
    if odd is not None:
        raise UsageError(f"{path}: row {question_id}: {odd} is not text")
    try:
        if "SQL" in row:  # BIRD
            return Question(
                question_id=question_id,
                db_id=row["db_id"],
                question=row["question"],
                gold_sql=row["SQL"],
                evidence=row.get("evidence") or "",
                difficulty=row.get("difficulty"),
            )
        sql = row.get("sql")
        return Question(
            question_id=question_id,
            db_id=row["db_id"],
            question=row["question"],
            gold_sql=row["query"],
            difficulty=spider_hardness(sql) if isinstance(sql, dict) else None,
        )
    except KeyError as missing:
        raise UsageError(f"{path}: row {question_id} has no field {missing}") from None


def load_schemas(root: Path) -> dict[str, rat.Schema]:
    """``{db_id: rat.Schema}`` from ``tables.json`` (Spider) or ``*_tables.json`` (BIRD); a folder
    with neither (your own data) has its databases' own, read from their catalogues
    (``database/<db_id>/<db_id>.sqlite``: tables, columns with their declared types, keys)."""

    root = Path(root)
    files = (
        [root / "tables.json"]
        if (root / "tables.json").exists()
        else sorted(root.glob("*_tables.json"))
    )
    if not files and (databases := own_databases(root)):
        return _schemas_of_databases(databases)
    if not files:
        raise FileNotFoundError(f"no tables.json or dev_tables.json under {root}")
    schemas: dict[str, rat.Schema] = {}
    for path in files:
        for db_id, schema in schemas_of(read_json(path), path).items():
            schemas.setdefault(db_id, schema)
    return schemas


def schemas_of(entries: Any, path: Path | str) -> dict[str, rat.Schema]:
    """``{db_id: rat.Schema}`` of the ``tables.json`` entries read from ``path``; ``UsageError``
    (one line naming the file and the entry) for one that is not a schema."""
    import rat

    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: expected a JSON list of tables.json entries")
    out: dict[str, rat.Schema] = {}
    for k, entry in enumerate(entries):
        db_id = entry.get("db_id")
        if not isinstance(db_id, str) or not db_id:
            raise UsageError(f"{path}: entry {k} has no db_id")
        if db_id in out:  # (the later one was ignored)
            raise UsageError(f"{path}: db_id {db_id!r} has two entries (entry {k} and an earlier one)")
        try:
            out[db_id] = rat.Schema.from_spider(entry)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{path}: {db_id}: {e}") from None
    return out


def own_databases(root: Path) -> dict[str, Path]:
    """``{db_id: path}`` of the SQLite files of a Spider-layout folder (``database/<db_id>/<db_id>.sqlite``)."""
    paths = sorted(Path(root).glob("database/*/*.sqlite"))
    return {p.parent.name: p for p in paths if p.stem == p.parent.name}


def _schemas_of_databases(databases: dict[str, Path]) -> dict[str, rat.Schema]:
    """Each database's schema from its catalogue, read-only; ``UsageError`` naming one that cannot be read."""
    from model.data.databases import DatabaseError, SqliteDatabase
    from model.data.execution import DEFAULT_MAX_RESULT_BYTES, DEFAULT_TIMEOUT_S

    out = {}
    for db_id, path in databases.items():
        database = SqliteDatabase(path, timeout_s=DEFAULT_TIMEOUT_S, max_rows=1, max_result_bytes=DEFAULT_MAX_RESULT_BYTES)
        try:
            out[db_id] = database.schema(db_id)
        except DatabaseError as error:
            raise UsageError(f"{path}: {error} (no tables.json: each database's schema is read from it)") from None
        finally:
            database.close()
    return out


def database_path(root: Path, db_id: str) -> Path | None:
    """The SQLite file of ``db_id``, or None when the dataset copy has no such database."""
    root = Path(root)
    for folder in ("database", "dev_databases", "train_databases"):
        path = root / folder / db_id / f"{db_id}.sqlite"
        if path.is_file():
            return path
    return None


# ---------------------------------------------------------------------------------------------
# Spider hardness, as the official evaluation.py's Evaluator.eval_hardness computes it from the
# parsed `sql` field. Its quirks are kept on purpose so the levels match published breakdowns
# (dev: 248 easy, 446 medium, 174 hard, 166 extra): `has_agg` looks at element 0 of whatever it
# is given, so a NOT in WHERE and every 'and'/'or' connective in HAVING count as aggregations.

_WHERE_OPS = ("not", "between", "=", ">", "<", ">=", "<=", "!=", "in", "like", "is", "exists")
_LIKE = _WHERE_OPS.index("like")


def _has_agg(unit: Any) -> bool:
    return unit[0] != 0  # AGG_OPS.index("none") == 0


def _count_agg(units: list[Any]) -> int:
    return sum(1 for unit in units if _has_agg(unit))


def _nested(sql: dict[str, Any]) -> list[dict[str, Any]]:
    nested = []
    for cond_unit in sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]:
        nested += [v for v in (cond_unit[3], cond_unit[4]) if isinstance(v, dict)]
    nested += [sql[op] for op in ("intersect", "except", "union") if sql[op] is not None]
    return nested


def _count_component1(sql: dict[str, Any]) -> int:
    count = sum(1 for key in ("where", "groupBy", "orderBy") if len(sql[key]) > 0)
    count += sql["limit"] is not None
    if len(sql["from"]["table_units"]) > 0:  # joins
        count += len(sql["from"]["table_units"]) - 1
    connectives = sql["from"]["conds"][1::2] + sql["where"][1::2] + sql["having"][1::2]
    count += sum(1 for token in connectives if token == "or")
    cond_units = sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]
    count += sum(1 for cond_unit in cond_units if cond_unit[1] == _LIKE)
    return count


def _count_others(sql: dict[str, Any]) -> int:
    agg_count = _count_agg(sql["select"][1])
    agg_count += _count_agg(sql["where"][::2])
    agg_count += _count_agg(sql["groupBy"])
    if len(sql["orderBy"]) > 0:
        val_units = sql["orderBy"][1]
        agg_count += _count_agg(
            [u[1] for u in val_units if u[1]] + [u[2] for u in val_units if u[2]]
        )
    agg_count += _count_agg(sql["having"])
    return (
        (agg_count > 1)
        + (len(sql["select"][1]) > 1)
        + (len(sql["where"]) > 1)
        + (len(sql["groupBy"]) > 1)
    )


def spider_hardness(sql: dict[str, Any]) -> str:
    """Official Spider hardness level of a parsed query (the ``sql`` field of Spider's dev.json).

    >>> spider_hardness({"select": [False, [[3, [0, [0, 0, False], None]]]],
    ...     "from": {"table_units": [["table_unit", 1]], "conds": []}, "where": [], "groupBy": [],
    ...     "having": [], "orderBy": [], "limit": None, "intersect": None, "union": None,
    ...     "except": None})
    'easy'
    """
    comp1, comp2, others = _count_component1(sql), len(_nested(sql)), _count_others(sql)
    if comp1 <= 1 and others == 0 and comp2 == 0:
        return "easy"
    if (others <= 2 and comp1 <= 1 and comp2 == 0) or (comp1 <= 2 and others < 2 and comp2 == 0):
        return "medium"
    if (
        (others > 2 and comp1 <= 2 and comp2 == 0)
        or (2 < comp1 <= 3 and others <= 2 and comp2 == 0)
        or (comp1 <= 1 and others == 0 and comp2 <= 1)
    ):
        return "hard"
    return "extra"
