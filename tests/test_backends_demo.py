"""The shipped model scores the same with a demo database's copy in PostgreSQL, DuckDB or MariaDB
as with its SQLite file: the demo dev gold queries and the three demo systems' predictions, as
``runnable_sql`` writes them for the backend, that execute the same there and read as the same
tree get node confidences within 0.01 of SQLite's (the Spider version: test_backends_data.py)."""

import json
from collections import Counter

import pytest

import rat
from model.data.copy_database import copy_database
from model.data.databases import open_database
from model.data.execution import runnable_sql
from model.synth.demo import demo_root

PER_DATABASE = 6  # dev questions of each demo database: gold and three systems' predictions
TOLERANCE = 0.01


@pytest.fixture(scope="module")
def demo():
    root = demo_root()
    schemas = {t["db_id"]: rat.Schema.from_spider(t)
               for t in json.loads((root / "tables.json").read_text())}
    dev = json.loads((root / "dev.json").read_text())
    taken = Counter()
    queries = set()
    chosen = []
    for i, row in enumerate(dev):
        if taken[row["db_id"]] < PER_DATABASE:
            taken[row["db_id"]] += 1
            chosen.append(i)
            queries.add((row["db_id"], row["query"]))
    ids = {f"dev_{i}" for i in chosen}
    for path in sorted((root / "predictions").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("question_id") in ids:
                queries.add((row["db_id"], row["sql"]))
    files = {db: root / "database" / db / f"{db}.sqlite" for db in schemas}
    return schemas, sorted(queries), files


def _same(lite, copy, ordered: bool) -> bool:
    """Whether both ran and gave the same rows (in order under ORDER BY; sums of reals to 6
    places: MariaDB adds them in another order)."""
    if lite[1] is not None or copy[1] is not None:
        return False
    a, b = ([tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows]
            for rows in (lite[0], copy[0]))
    return a == b if ordered else Counter(a) == Counter(b)


def _urls(backend, files, server, tmp_path):
    if backend == "duckdb":
        return {db: copy_database(f, f"duckdb:///{tmp_path}/").url for db, f in files.items()}
    urls = {}
    for db, f in files.items():
        copy_database(f, server.url(db, admin=True), grant="rat_scorer")
        urls[db] = server.url(db)
    return urls


def _tree_hash(sql: str, schema, dialect: str) -> str | None:
    """The tree's hash; None where rat cannot read the translation (PostgreSQL's
    ``(ARRAY_AGG(x))[1]``, SQLite's column neither grouped nor aggregated)."""
    try:
        return rat.to_tree(sql, schema, dialect).hash
    except rat.RATError:
        return None


@pytest.mark.parametrize("backend", ["postgres", "duckdb", "mysql"])
def test_node_confidences_on_the_copy_equal_sqlites(backend, demo, request, tmp_path):
    from model.scoring.scorer import RowError, Scorer

    if backend == "duckdb":
        pytest.importorskip("duckdb")
    schemas, queries, files = demo
    server = None if backend == "duckdb" else request.getfixturevalue(
        {"postgres": "postgres_server", "mysql": "mysql_server"}[backend])
    urls = _urls(backend, files, server, tmp_path)
    rows_lite, rows_copy = [], []
    for db, sql in queries:
        written = runnable_sql(sql, "sqlite", backend, schemas[db])
        with open_database(files[db]) as lite, open_database(urls[db]) as copy:
            same = _same(lite.execute(sql), copy.execute(written), "order by" in sql.lower())
        if not same or _tree_hash(written, schemas[db], backend) != \
                rat.to_tree(sql, schemas[db]).hash:
            continue
        rows_lite.append({"sql": sql, "schema": schemas[db], "database": str(files[db])})
        rows_copy.append({"sql": written, "schema": schemas[db], "database": urls[db],
                          "dialect": backend})
    assert len(rows_copy) >= 0.8 * len(queries), (len(rows_copy), len(queries))
    scorer = Scorer.pretrained()
    lite = scorer.score_many(rows_lite, progress=False, label_shift=False)
    copy = scorer.score_many(rows_copy, progress=False, label_shift=False)
    for a, b, row in zip(lite, copy, rows_copy, strict=True):
        assert not isinstance(a, RowError) and not isinstance(b, RowError), (a, b)
        assert [n.label for n in a.nodes] == [n.label for n in b.nodes]
        gaps = [abs(x.confidence - y.confidence) for x, y in zip(a.nodes, b.nodes, strict=True)]
        assert max(gaps) <= TOLERANCE, (row["sql"], max(gaps))
        # the database matters: these are not the scores without one
    without = scorer.score_many([{**r, "database": None} for r in rows_copy], progress=False,
                                label_shift=False)
    assert any(abs(x.confidence - y.confidence) > TOLERANCE
               for a, b in zip(copy, without, strict=True) for x, y in zip(a.nodes, b.nodes))


# SQLite's type affinity, which PostgreSQL and DuckDB refuse or read otherwise: a TEXT column
# holding numbers and the text 'null', an INTEGER one, a TEXT one of integers (an integer column
# in the copy), dates as text
AFFINITY_ROWS = [("150", 1, "1", "2010-03-01"), ("95", 2, "2", "1999-12-31"),
                 ("null", 1, "2", None), ("12abc", None, "1", " 7 days"), (None, 2, None, "x"),
                 ("2", 2, "2", "2")]
AFFINITY_QUERIES = [
    "SELECT count(*) FROM cars WHERE hp > 150",  # compared as text: 'null' and '95'
    "SELECT count(*) FROM cars WHERE 100 <= hp",
    "SELECT hp FROM cars WHERE hp BETWEEN 1 AND 9 ORDER BY hp",
    "SELECT avg(hp), sum(hp) FROM cars",  # 'null' is 0, '12abc' 12
    "SELECT avg(made), sum(made) FROM cars",
    "SELECT count(*) FROM cars WHERE continent = 'europe'",  # never equal
    "SELECT count(*) FROM cars WHERE continent != 'europe' OR continent IS NULL",
    "SELECT continent = \"europe\" FROM cars ORDER BY hp",
    "SELECT count(*) FROM cars WHERE code = 'Y'",
    "SELECT count(*) FROM cars WHERE code NOT IN ('Y', 'N')",
    "SELECT count(*) FROM cars WHERE code = 2",  # as before: the copy's integers
    "SELECT count(*) FROM cars WHERE hp = code",  # two text columns: as text
    "SELECT count(*) FROM cars AS a JOIN cars AS b ON a.continent = b.hp",  # as numbers
    "SELECT count(*) FROM cars AS a JOIN cars AS b ON a.continent = b.code",
    # a subquery of more rows than one compared with a value: its first row
    ("SELECT count(*) FROM cars WHERE continent = (SELECT continent FROM cars"
     " WHERE continent IS NOT NULL ORDER BY code DESC, continent)"),
]


@pytest.mark.parametrize("backend", ["postgres", "duckdb"])
def test_sqlite_type_affinity_runs_as_sqlite_means_it(backend, request, tmp_path):
    """Comparisons and sums that SQLite's type affinity makes work (and a subquery compared with
    a value, which SQLite reads as its first row) run on the copy as ``runnable_sql`` writes them
    with the schema's column types, and give SQLite's rows; without the types, the copy refuses
    the affinity ones."""
    import sqlite3

    if backend == "duckdb":
        pytest.importorskip("duckdb")
    path = tmp_path / "cars.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE cars (hp TEXT, continent INTEGER, code TEXT, made DATETIME)")
        conn.executemany("INSERT INTO cars VALUES (?, ?, ?, ?)", AFFINITY_ROWS)
    conn.close()
    schema = rat.Schema({"cars": ["hp", "continent", "code", "made"]},
                        column_types={"cars.hp": "text", "cars.continent": "number",
                                      "cars.code": "text", "cars.made": "time"})
    if backend == "duckdb":
        url = copy_database(path, f"duckdb:///{tmp_path}/").url
    else:
        server = request.getfixturevalue("postgres_server")
        copy_database(path, server.url("affinity_cars", admin=True), name="affinity_cars",
                      grant="rat_scorer")
        url = server.url("affinity_cars")
    refused = 0
    with open_database(path) as lite, open_database(url) as copy:
        for sql in AFFINITY_QUERIES:
            written = runnable_sql(sql, "sqlite", backend, schema)
            assert _same(lite.execute(sql), copy.execute(written), "order by" in sql.lower()), \
                (sql, written, lite.execute(sql), copy.execute(written))
            untyped = runnable_sql(sql, "sqlite", backend, {"cars": list(schema.tables["cars"])})
            refused += copy.execute(untyped)[1] is not None
    assert refused >= 11, refused
