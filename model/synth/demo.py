"""The embedded demo corpus: small SQLite databases, templated questions and pseudo-system predictions.

Everything is generated here from `demo_corpus/schemas.json` and `demo_corpus/hand_written.json`
with fixed seeds, so every checkout builds the same corpus, in Spider format, in a few seconds:

    root/tables.json, root/train.json, root/dev.json, root/database/<db>/<db>.sqlite,
    root/predictions/<system>.jsonl   (question_id, db_id, sql, samples)

Every gold query is executed during the build and kept only if it runs and returns a non-empty,
non-NULL result. Both splits cover all five databases, so a trainer can split by `db_id`
(schema-disjoint train/val/test) within either split.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from model.data.cache import cache_dir as project_cache_dir

BUILDER_VERSION = "1"
CORPUS_DIR = Path(__file__).resolve().parent / "demo_corpus"
REPO = Path(__file__).resolve().parents[2]

# Pseudo-systems: name -> mean error rate of one sampled output (before execution relabels
# perturbations that happen to return the gold result). Real Spider systems sit at 17-35% wrong.
DEMO_SYSTEMS = {"demo_strong": 0.20, "demo_medium": 0.30, "demo_weak": 0.36}
SAMPLES_PER_PREDICTION = 4
WRONG_POOL = 6  # distinct perturbations per dev question that the systems' mistakes come from
DEV_FRACTION = 0.4

# (low, high, decimals) of each numeric column; integers when decimals == 0.
NUMERIC_RANGES = {
    "rating": (1.0, 5.0, 1), "unit_price": (2.0, 900.0, 2), "weight_kg": (0.1, 60.0, 1),
    "capacity": (500, 90000, 0), "quantity": (0, 800, 0), "total_amount": (20.0, 9000.0, 2),
    "cost": (15.0, 1500.0, 2), "budget": (80000.0, 2000000.0, 0), "salary": (42000.0, 180000.0, 0),
    "hire_year": (1990, 2023, 0), "year_of_study": (1, 5, 0), "gpa": (2.0, 4.0, 2),
    "credits": (1, 6, 0), "grade": (40.0, 100.0, 1), "formed_year": (1965, 2020, 0),
    "release_year": (1970, 2024, 0), "copies_sold": (2000, 3000000, 0),
    "ticket_price": (15.0, 250.0, 2), "attendance": (150, 60000, 0), "opened_year": (1890, 2015, 0),
    "birth_year": (1920, 1995, 0), "publication_year": (1950, 2024, 0), "pages": (90, 900, 0),
    "join_year": (2005, 2024, 0), "days_kept": (1, 60, 0), "years_experience": (1, 40, 0),
    "age": (1, 95, 0), "fee": (40.0, 400.0, 2),
}

_NAME_PARTS = {
    "person": (["Ada", "Bilal", "Chen", "Dara", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas", "Kiri",
                "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vera"],
               ["Adams", "Brook", "Costa", "Duarte", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito",
                "Jensen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Patel", "Rossi", "Suzuki"]),
    "company": (["Apex", "Blue River", "Cobalt", "Delta", "Evergreen", "Falcon", "Granite", "Harbor",
                 "Ion", "Juniper", "Keystone", "Lumen"], ["Industries", "Trading", "Supply", "Works", "Group"]),
    "product": (["Compact", "Heavy Duty", "Smart", "Classic", "Portable", "Premium", "Eco"],
                ["Drill", "Desk", "Router", "Carton", "Lamp", "Chair", "Cable", "Monitor", "Blanket", "Saw"]),
    "warehouse": (["North", "South", "East", "West", "Central", "Harbor", "Airport"], ["Depot", "Hub"]),
    "band": (["The Velvet", "Neon", "Silver", "Midnight", "Paper", "Electric", "Wild", "Golden", "Quiet"],
             ["Foxes", "Harbors", "Engines", "Echoes", "Ravens", "Lanterns", "Tides"]),
    "album": (["Songs of", "Return to", "Nights in", "Letters from", "Dreams of", "Echoes of"],
              ["Winter", "the Coast", "Tokyo", "Home", "Glass", "the Valley", "Neon", "Summer"]),
    "venue": (["Royal", "Grand", "Union", "Blue Note", "Riverside", "Metro"], ["Arena", "Hall", "Club"]),
    "book": (["The Silent", "A Brief", "The Last", "Hidden", "The Glass", "Winter", "The Long", "Lost"],
             ["Garden", "History", "Orbit", "Letters", "Harbor", "Kingdom", "Algorithm", "River"]),
    "course": (["Introduction to", "Advanced", "Topics in", "Foundations of", "Seminar in"],
               ["Mechanics", "Statistics", "Genetics", "Macroeconomics", "Syntax", "Algebra",
                "Ethics", "Thermodynamics", "Ecology", "Medieval Europe"]),
}


# ---------------------------------------------------------------------------------------------
# Databases


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str  # INTEGER, REAL or TEXT
    role: str  # pk, fk, name, cat, num, date
    phrase: str  # natural name used in questions and in tables.json column_names


@dataclass(frozen=True)
class Table:
    name: str
    singular: str
    plural: str
    columns: tuple[Column, ...]
    fks: tuple[tuple[str, str, str], ...]  # (column, parent table, parent column)
    primary_key: tuple[str, ...]
    rows: int
    values: dict = field(default_factory=dict, hash=False, compare=False)

    def role(self, role: str) -> list[Column]:
        return [c for c in self.columns if c.role == role]

    @property
    def label(self) -> Column:
        """The column that names a row (a name or title), else the primary key."""
        named = self.role("name")
        return named[0] if named else self.columns[0]


@dataclass(frozen=True)
class Database:
    db_id: str
    tables: dict[str, Table]
    bridges: tuple[tuple[str, str, str, str], ...]  # (bridge, left table, right table, phrase)


def load_database_specs() -> dict[str, Database]:
    """The demo databases as declared in demo_corpus/schemas.json."""
    raw = json.loads((CORPUS_DIR / "schemas.json").read_text())
    specs = {}
    for db_id, db in raw.items():
        if db_id.startswith("_"):
            continue
        tables = {}
        for name, t in db["tables"].items():
            columns = tuple(Column(*c) for c in t["columns"])
            pk = tuple(t.get("primary_key") or [c.name for c in columns if c.role == "pk"])
            tables[name] = Table(name, t["singular"], t["plural"], columns,
                                 tuple(tuple(fk) for fk in t.get("fks", [])), pk, t["rows"],
                                 t.get("values", {}))
        specs[db_id] = Database(db_id, tables, tuple(tuple(b) for b in db.get("bridges", [])))
    return specs


def _value(rng: random.Random, table: Table, column: Column, used: set) -> object:
    pool = table.values.get(column.name)
    if column.role == "num":
        low, high, decimals = NUMERIC_RANGES[column.name]
        if decimals == 0:
            return rng.randint(int(low), int(high))
        return round(rng.uniform(low, high), decimals)
    if column.role == "date":
        return f"{rng.choice([2023, 2024])}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if isinstance(pool, list):
        if column.role == "name":  # names are unique: take the pool in order
            return pool[len(used) % len(pool)]
        return rng.choice(pool)
    if isinstance(pool, str):
        first, second = _NAME_PARTS[pool]
        for _ in range(100):  # unique names where the pool allows it
            name = f"{rng.choice(first)} {rng.choice(second)}"
            if name not in used:
                return name
        return name
    raise ValueError(f"no value rule for {table.name}.{column.name}")


def generate_rows(db: Database, seed: int = 0) -> dict[str, list[tuple]]:
    """Deterministic rows for every table; foreign keys point at existing parent rows."""
    rng = random.Random(f"{db.db_id}:{seed}")
    rows: dict[str, list[tuple]] = {}
    # Parents before children: a table is ready when all its fk parents are generated.
    pending = list(db.tables.values())
    while pending:
        table = next(t for t in pending if all(p in rows for _, p, _ in t.fks if p != t.name))
        pending.remove(table)
        fk_parent = {col: (parent, pcol) for col, parent, pcol in table.fks}
        table_rows, keys, used_names = [], set(), set()
        for i in range(table.rows * 3):  # extra tries for composite keys colliding
            if len(table_rows) == table.rows:
                break
            row = []
            for column in table.columns:
                if column.role == "pk":
                    row.append(len(table_rows) + 1)
                elif column.name in fk_parent:
                    parent, pcol = fk_parent[column.name]
                    index = [c.name for c in db.tables[parent].columns].index(pcol)
                    # Skewed choice so that group-by questions have clear winners.
                    parents = rows[parent]
                    pick = min(int(rng.paretovariate(1.2)) - 1, len(parents) - 1)
                    row.append(parents[(pick * 7 + rng.randrange(2)) % len(parents)][index]
                               if rng.random() < 0.5 else rng.choice(parents)[index])
                else:
                    row.append(_value(rng, table, column, used_names))
                    if column.role == "name":
                        used_names.add(row[-1])
            key = tuple(row[[c.name for c in table.columns].index(k)] for k in table.primary_key)
            if key in keys:
                continue
            keys.add(key)
            table_rows.append(tuple(row))
        rows[table.name] = table_rows
    return rows


def write_database(db: Database, rows: dict[str, list[tuple]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        for table in db.tables.values():
            cols = [f'"{c.name}" {c.sql_type}' for c in table.columns]
            cols.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
            cols += [f"FOREIGN KEY ({c}) REFERENCES {p}({pc})" for c, p, pc in table.fks]
            conn.execute(f"CREATE TABLE {table.name} ({', '.join(cols)})")
            marks = ", ".join("?" * len(table.columns))
            conn.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows[table.name])
    conn.close()


def spider_table_entry(db: Database) -> dict:
    """The tables.json entry of a demo database, exactly in Spider's layout."""
    names = list(db.tables)
    column_names, column_original, column_types = [[-1, "*"]], [[-1, "*"]], ["text"]
    index = {}
    for ti, table in enumerate(db.tables.values()):
        for column in table.columns:
            index[(table.name, column.name)] = len(column_names)
            column_names.append([ti, column.phrase.lower()])
            column_original.append([ti, column.name])
            column_types.append("number" if column.sql_type in ("INTEGER", "REAL") else
                                "time" if column.role == "date" else "text")
    primary_keys = [index[(t.name, k)] for t in db.tables.values() for k in t.primary_key[:1]]
    foreign_keys = [[index[(t.name, c)], index[(p, pc)]]
                    for t in db.tables.values() for c, p, pc in t.fks]
    return {"db_id": db.db_id, "table_names": [db.tables[n].plural for n in names],
            "table_names_original": names, "column_names": column_names,
            "column_names_original": column_original, "column_types": column_types,
            "primary_keys": primary_keys, "foreign_keys": foreign_keys}


# ---------------------------------------------------------------------------------------------
# Questions from templates


@dataclass(frozen=True)
class GoldQuestion:
    db_id: str
    question: str
    query: str
    template: str


class _Values:
    """Draws literal values for templates from the database itself, so filters select rows."""

    def __init__(self, conn: sqlite3.Connection, rng: random.Random):
        self.conn, self.rng = conn, rng

    def distinct(self, table: str, column: str) -> list:
        rows = self.conn.execute(f"SELECT DISTINCT {column} FROM {table} "
                                 f"WHERE {column} IS NOT NULL ORDER BY {column}").fetchall()
        return [r[0] for r in rows]

    def pick(self, table: str, column: str):
        return self.rng.choice(self.distinct(table, column))

    def threshold(self, table: str, column: str, quantile: float | None = None):
        values = sorted(self.distinct(table, column))
        q = quantile if quantile is not None else self.rng.uniform(0.25, 0.75)
        value = values[int(q * (len(values) - 1))]
        return int(value) if float(value).is_integer() else round(value, 1)

    def substring(self, table: str, column: str) -> str:
        word = self.rng.choice(str(self.pick(table, column)).split())
        start = self.rng.randrange(max(1, len(word) - 3))
        return word[start:start + 3 + self.rng.randrange(2)].lower()


def _lit(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


TemplateFn = Callable[[Database, _Values], Iterator[tuple[str, str]]]
TEMPLATES: dict[str, TemplateFn] = {}  # name -> (database, values) -> (question, sql) pairs


def template(fn: TemplateFn) -> TemplateFn:
    TEMPLATES[fn.__name__] = fn
    return fn


def per_table(fn):
    """Registers a template written for one table; it runs on every table of a database."""
    def run(db: Database, v: _Values):
        for table in db.tables.values():
            yield from fn(table, v)
    run.__name__ = fn.__name__
    return template(run)


def per_foreign_key(fn):
    """Registers a template over (child, fk column, parent, parent column) of each foreign key."""
    def run(db: Database, v: _Values):
        for child in db.tables.values():
            for column, parent, pcol in child.fks:
                yield from fn(child, column, db.tables[parent], pcol, v)
    run.__name__ = fn.__name__
    return template(run)


_AGG = {"avg": "average", "max": "maximum", "min": "minimum", "sum": "total"}


@per_table
def count_all(t, v):
    yield f"How many {t.plural} are there?", f"SELECT count(*) FROM {t.name}"


@per_table
def list_labels(t, v):
    if t.role("name"):
        yield (f"List the {t.label.phrase} of all {t.plural}.", f"SELECT {t.label.name} FROM {t.name}")


@per_table
def list_ordered(t, v):
    for num in t.role("num"):
        direction = v.rng.choice(["ASC", "DESC"])
        words = "ascending" if direction == "ASC" else "descending"
        yield ((f"Show the {t.label.phrase} and {num.phrase} of every {t.singular}, sorted by "
               f"{num.phrase} in {words} order."),
               f"SELECT {t.label.name}, {num.name} FROM {t.name} ORDER BY {num.name} {direction}")


@per_table
def aggregate(t, v):
    for num in t.role("num"):
        fn = v.rng.choice(list(_AGG))
        yield (f"What is the {_AGG[fn]} {num.phrase} of all {t.plural}?",
               f"SELECT {fn}({num.name}) FROM {t.name}")


@per_table
def min_max(t, v):
    for num in t.role("num"):
        yield (f"What are the maximum and minimum {num.phrase} across all {t.plural}?",
               f"SELECT max({num.name}), min({num.name}) FROM {t.name}")


@per_table
def filter_number(t, v):
    for num in t.role("num"):
        x = v.threshold(t.name, num.name)
        op, words = v.rng.choice([(">", "greater than"), ("<", "less than"),
                                  (">=", "at least"), ("<=", "at most")])
        yield (f"Which {t.plural} have a {num.phrase} {words} {x}? Give their {t.label.phrase}.",
               f"SELECT {t.label.name} FROM {t.name} WHERE {num.name} {op} {x}")


@per_table
def filter_category(t, v):
    for cat in t.role("cat"):
        x = v.pick(t.name, cat.name)
        yield (f"What is the {t.label.phrase} of each {t.singular} whose {cat.phrase} is {x}?",
               f"SELECT {t.label.name} FROM {t.name} WHERE {cat.name} = {_lit(x)}")


@per_table
def count_filtered(t, v):
    for cat in t.role("cat"):
        x = v.pick(t.name, cat.name)
        yield (f"How many {t.plural} have {cat.phrase} {x}?",
               f"SELECT count(*) FROM {t.name} WHERE {cat.name} = {_lit(x)}")


@per_table
def between(t, v):
    for num in t.role("num"):
        a, b = sorted([v.threshold(t.name, num.name, 0.2), v.threshold(t.name, num.name, 0.6)])
        if a != b:
            yield (f"List the {t.label.phrase} of {t.plural} with {num.phrase} between {a} and {b}.",
                   f"SELECT {t.label.name} FROM {t.name} WHERE {num.name} BETWEEN {a} AND {b}")


@per_table
def like(t, v):
    if t.role("name"):
        sub = v.substring(t.name, t.label.name)
        yield (f"Find the {t.plural} whose {t.label.phrase} contains '{sub}'.",
               f"SELECT {t.label.name} FROM {t.name} WHERE {t.label.name} LIKE '%{sub}%'")


@per_table
def two_conditions(t, v):
    for cat in t.role("cat"):
        for num in t.role("num")[:1]:
            x, y = v.pick(t.name, cat.name), v.threshold(t.name, num.name, 0.3)
            yield ((f"Which {t.plural} with {cat.phrase} {x} have a {num.phrase} above {y}? "
                   f"List their {t.label.phrase}."),
                   (f"SELECT {t.label.name} FROM {t.name} WHERE {cat.name} = {_lit(x)} "
                   f"AND {num.name} > {y}"))


@per_table
def either_category(t, v):
    for cat in t.role("cat"):
        values = v.distinct(t.name, cat.name)
        if len(values) >= 2:
            a, b = v.rng.sample(values, 2)
            yield (f"Count the {t.plural} whose {cat.phrase} is either {a} or {b}.",
                   (f"SELECT count(*) FROM {t.name} WHERE {cat.name} = {_lit(a)} "
                   f"OR {cat.name} = {_lit(b)}"))


@per_table
def group_count(t, v):
    for cat in t.role("cat"):
        yield (f"For each {cat.phrase}, how many {t.plural} are there?",
               f"SELECT {cat.name}, count(*) FROM {t.name} GROUP BY {cat.name}")


@per_table
def group_aggregate(t, v):
    for cat in t.role("cat"):
        for num in t.role("num")[:1]:
            fn = v.rng.choice(list(_AGG))
            yield (f"What is the {_AGG[fn]} {num.phrase} of {t.plural} for each {cat.phrase}?",
                   f"SELECT {cat.name}, {fn}({num.name}) FROM {t.name} GROUP BY {cat.name}")


@per_table
def having_count(t, v):
    for cat in t.role("cat"):
        counts = [r[0] for r in v.conn.execute(
            f"SELECT count(*) FROM {t.name} GROUP BY {cat.name}").fetchall()]
        k = sorted(counts)[len(counts) // 2] - 1
        if k >= 1:
            yield (f"Which {cat.phrase} values are shared by more than {k} {t.plural}?",
                   f"SELECT {cat.name} FROM {t.name} GROUP BY {cat.name} HAVING count(*) > {k}")


@per_table
def most_common(t, v):
    for cat in t.role("cat"):
        yield (f"Which {cat.phrase} is the most common among {t.plural}?",
               f"SELECT {cat.name} FROM {t.name} GROUP BY {cat.name} ORDER BY count(*) DESC LIMIT 1")


@per_table
def argmax(t, v):
    for num in t.role("num"):
        direction, words = v.rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        yield (f"What is the {t.label.phrase} of the {t.singular} with the {words} {num.phrase}?",
               f"SELECT {t.label.name} FROM {t.name} ORDER BY {num.name} {direction} LIMIT 1")


@per_table
def top_k(t, v):
    for num in t.role("num"):
        k = v.rng.choice([3, 5])
        yield ((f"List the {t.label.phrase} and {num.phrase} of the {k} {t.plural} with the largest "
               f"{num.phrase}."),
               f"SELECT {t.label.name}, {num.name} FROM {t.name} ORDER BY {num.name} DESC LIMIT {k}")


@per_table
def distinct_values(t, v):
    for cat in t.role("cat"):
        yield (f"List the distinct {cat.phrase} values of {t.plural}.",
               f"SELECT DISTINCT {cat.name} FROM {t.name}")


@per_table
def count_distinct(t, v):
    for cat in t.role("cat"):
        yield (f"How many different {cat.phrase} values do the {t.plural} have?",
               f"SELECT count(DISTINCT {cat.name}) FROM {t.name}")


@per_table
def above_average(t, v):
    for num in t.role("num"):
        yield ((f"Which {t.plural} have a {num.phrase} above the average of all {t.plural}? "
               f"Give their {t.label.phrase}."),
               (f"SELECT {t.label.name} FROM {t.name} WHERE {num.name} > "
               f"(SELECT avg({num.name}) FROM {t.name})"))


@per_table
def union_categories(t, v):
    for cat in t.role("cat"):
        for num in t.role("num")[:1]:
            x, y = v.pick(t.name, cat.name), v.threshold(t.name, num.name, 0.8)
            yield ((f"Give the {t.label.phrase} of {t.plural} that either have {cat.phrase} {x} or "
                   f"a {num.phrase} above {y}."),
                   (f"SELECT {t.label.name} FROM {t.name} WHERE {cat.name} = {_lit(x)} UNION "
                   f"SELECT {t.label.name} FROM {t.name} WHERE {num.name} > {y}"))


def _join(child: Table, fk: str, parent: Table, pk: str) -> str:
    return f"{child.name} JOIN {parent.name} ON {child.name}.{fk} = {parent.name}.{pk}"


@per_foreign_key
def join_list(c, fk, p, pk, v):
    if c.role("name"):
        yield ((f"Show the {c.label.phrase} of each {c.singular} together with the {p.label.phrase} "
               f"of its {p.singular}."),
               f"SELECT {c.name}.{c.label.name}, {p.name}.{p.label.name} FROM {_join(c, fk, p, pk)}")


@per_foreign_key
def join_filter(c, fk, p, pk, v):
    for cat in p.role("cat"):
        x = v.pick(p.name, cat.name)
        target = c.label if c.role("name") else (c.role("num") or c.columns)[0]
        yield (f"List the {target.phrase} of {c.plural} whose {p.singular} has {cat.phrase} {x}.",
               (f"SELECT {c.name}.{target.name} FROM {_join(c, fk, p, pk)} "
               f"WHERE {p.name}.{cat.name} = {_lit(x)}"))


@per_foreign_key
def join_group_count(c, fk, p, pk, v):
    yield (f"For each {p.singular}, show its {p.label.phrase} and the number of {c.plural}.",
           (f"SELECT {p.name}.{p.label.name}, count(*) FROM {_join(c, fk, p, pk)} "
           f"GROUP BY {p.name}.{pk}"))


@per_foreign_key
def join_having(c, fk, p, pk, v):
    k = v.rng.choice([2, 3])
    yield (f"Which {p.plural} have at least {k} {c.plural}? List their {p.label.phrase}.",
           (f"SELECT {p.name}.{p.label.name} FROM {_join(c, fk, p, pk)} GROUP BY {p.name}.{pk} "
           f"HAVING count(*) >= {k}"))


@per_foreign_key
def join_argmax(c, fk, p, pk, v):
    yield (f"What is the {p.label.phrase} of the {p.singular} with the most {c.plural}?",
           (f"SELECT {p.name}.{p.label.name} FROM {_join(c, fk, p, pk)} GROUP BY {p.name}.{pk} "
           f"ORDER BY count(*) DESC LIMIT 1"))


@per_foreign_key
def join_aggregate(c, fk, p, pk, v):
    for num in c.role("num")[:1]:
        x = v.pick(p.name, p.label.name)
        fn = v.rng.choice(list(_AGG))
        yield ((f"What is the {_AGG[fn]} {num.phrase} of the {c.plural} of the {p.singular} "
               f"{x}?"),
               (f"SELECT {fn}({c.name}.{num.name}) FROM {_join(c, fk, p, pk)} "
               f"WHERE {p.name}.{p.label.name} = {_lit(x)}"))


@per_foreign_key
def join_group_average(c, fk, p, pk, v):
    for num in c.role("num")[:1]:
        yield ((f"For each {p.singular}, what is the average {num.phrase} of its {c.plural}? "
               f"Show the {p.label.phrase} too."),
               (f"SELECT {p.name}.{p.label.name}, avg({c.name}.{num.name}) FROM "
               f"{_join(c, fk, p, pk)} GROUP BY {p.name}.{pk}"))


@per_foreign_key
def not_in(c, fk, p, pk, v):
    yield (f"List the {p.label.phrase} of {p.plural} that have no {c.plural}.",
           f"SELECT {p.label.name} FROM {p.name} WHERE {pk} NOT IN (SELECT {fk} FROM {c.name})")


@per_foreign_key
def in_subquery(c, fk, p, pk, v):
    for num in c.role("num")[:1]:
        x = v.threshold(c.name, num.name, 0.7)
        yield ((f"Which {p.plural} have some {c.singular} with {num.phrase} above {x}? "
               f"Give their {p.label.phrase}."),
               (f"SELECT {p.label.name} FROM {p.name} WHERE {pk} IN "
               f"(SELECT {fk} FROM {c.name} WHERE {num.name} > {x})"))


@per_foreign_key
def intersect(c, fk, p, pk, v):
    for cat in c.role("cat")[:1]:
        values = v.distinct(c.name, cat.name)
        if len(values) >= 2:
            a, b = v.rng.sample(values, 2)
            part = f"SELECT {p.name}.{p.label.name} FROM {_join(c, fk, p, pk)} WHERE {c.name}.{cat.name} = "
            yield ((f"Which {p.plural} have both {c.plural} with {cat.phrase} {a} and {c.plural} "
                   f"with {cat.phrase} {b}?"),
                   f"{part}{_lit(a)} INTERSECT {part}{_lit(b)}")


@per_foreign_key
def except_(c, fk, p, pk, v):
    for cat in c.role("cat")[:1]:
        x = v.pick(c.name, cat.name)
        yield ((f"Which {p.plural} never had a {c.singular} with {cat.phrase} {x}? "
               f"Give their {p.label.phrase}."),
               (f"SELECT {p.label.name} FROM {p.name} EXCEPT SELECT {p.name}.{p.label.name} FROM "
               f"{_join(c, fk, p, pk)} WHERE {c.name}.{cat.name} = {_lit(x)}"))


@template
def bridge(db, v):
    """Two-hop joins through a table with two foreign keys (inventory, enrollments, ...)."""
    for bridge_name, left, right, phrase in db.bridges:
        b, lt, rt = db.tables[bridge_name], db.tables[left], db.tables[right]
        lfk = next((c, pc) for c, p, pc in b.fks if p == left)
        rfk = next((c, pc) for c, p, pc in b.fks if p == right)
        x = v.pick(rt.name, rt.label.name)
        joins = (f"{lt.name} JOIN {b.name} ON {lt.name}.{lfk[1]} = {b.name}.{lfk[0]} "
                 f"JOIN {rt.name} ON {b.name}.{rfk[0]} = {rt.name}.{rfk[1]}")
        yield (f"List the {lt.label.phrase} of the {lt.plural} {phrase} the {rt.singular} {x}.",
               (f"SELECT DISTINCT {lt.name}.{lt.label.name} FROM {joins} "
               f"WHERE {rt.name}.{rt.label.name} = {_lit(x)}"))
        yield ((f"For each {rt.singular}, how many distinct {lt.plural} are {phrase} it? "
               f"Show the {rt.label.phrase}."),
               (f"SELECT {rt.name}.{rt.label.name}, count(DISTINCT {lt.name}.{lfk[1]}) FROM {joins} "
               f"GROUP BY {rt.name}.{rfk[1]}"))


def _non_empty(conn: sqlite3.Connection, sql: str) -> bool:
    try:
        rows = conn.execute(sql).fetchall()
    except sqlite3.Error as error:
        raise ValueError(f"demo gold query fails ({error}): {sql}") from error
    return any(value is not None for row in rows for value in row)


def generate_questions(db: Database, conn: sqlite3.Connection, seed: int = 0,
                       per_template: int = 3) -> list[GoldQuestion]:
    """Instantiate every template on `db`, keep those whose gold runs and returns rows."""
    rng = random.Random(f"questions:{db.db_id}:{seed}")
    values = _Values(conn, rng)
    questions, seen = [], set()
    for name, fn in TEMPLATES.items():
        candidates = list(fn(db, values))
        rng.shuffle(candidates)
        kept = 0
        for question, sql in candidates:
            if kept == per_template or sql in seen or not _non_empty(conn, sql):
                continue
            seen.add(sql)
            questions.append(GoldQuestion(db.db_id, question, sql, name))
            kept += 1
    return questions


# ---------------------------------------------------------------------------------------------
# Predictions of pseudo-systems


def _template_difficulty(template_name: str) -> float:
    """Logit offset: harder constructs get more errors, as in real systems."""
    hard = {"intersect": 1.2, "except_": 1.2, "not_in": 0.9, "in_subquery": 0.9, "bridge": 0.9,
            "above_average": 0.6, "union_categories": 0.8, "join_having": 0.7, "join_argmax": 0.7,
            "having_count": 0.6, "join_group_average": 0.4, "join_aggregate": 0.5}
    easy = {"count_all": -1.5, "list_labels": -1.2, "aggregate": -0.6, "count_filtered": -0.5,
            "distinct_values": -0.6, "min_max": -0.5}
    return hard.get(template_name, easy.get(template_name, 0.0))


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _draw(rng: random.Random, p_wrong: float, right: list[str], wrong: list[str],
          previous_wrong: str | None = None) -> str:
    """One output: right with probability 1 - p_wrong; a wrong one repeats the system's
    previous mistake half of the time."""
    if rng.random() >= p_wrong or not wrong:
        return rng.choice(right)
    if previous_wrong is not None and rng.random() < 0.5:
        return previous_wrong
    return rng.choice(wrong)


def make_predictions(questions: list[dict], schemas: dict[str, dict], db_paths: dict[str, Path],
                     difficulty: list[float], hand_written: dict[int, dict], seed: int = 0
                     ) -> dict[str, list[dict]]:
    """Predictions (with samples) of the pseudo-systems on `questions` (the dev split).

    Each system has a per-question error probability (system base rate + question difficulty);
    the prediction and each sample are wrong with that probability, and a wrong sample repeats
    the prediction's error half of the time, as sampled LLM outputs do.
    """
    import rat
    from model.synth.perturb import Perturber

    perturbers = {db_id: Perturber(rat.Schema.from_spider(entry), db_paths.get(db_id))
                  for db_id, entry in schemas.items()}
    golds, wrong_pools = [], []
    for index, q in enumerate(questions):
        perturber = perturbers[q["db_id"]]
        # Same printer as the perturbations, so style never gives an error away.
        golds.append(perturber.render(q["query"]))
        if index in hand_written:
            wrong_pools.append([perturber.render(s) for s in hand_written[index]["wrong"]])
        else:  # one pool per question: systems share typical mistakes, as real ones do
            made = perturber.perturb(q["query"], n=WRONG_POOL, seed=seed * 100_003 + index)
            wrong_pools.append([p.sql for p in made])
    out = {}
    for system, base_rate in DEMO_SYSTEMS.items():
        rng = random.Random(f"{system}:{seed}")
        rows = []
        for index, q in enumerate(questions):
            p_wrong = _sigmoid(_logit(base_rate) + difficulty[index] + rng.gauss(0, 0.5))
            right = [golds[index]]
            if index in hand_written:
                right += [perturbers[q["db_id"]].render(s) for s in hand_written[index]["right"]]

            sql = _draw(rng, p_wrong, right, wrong_pools[index])
            wrong = sql if sql not in right else None
            samples = [_draw(rng, p_wrong, right, wrong_pools[index], wrong)
                       for _ in range(SAMPLES_PER_PREDICTION)]
            rows.append({"question_id": f"dev_{index}", "db_id": q["db_id"], "sql": sql,
                         "samples": samples})
        out[system] = rows
    return out


# ---------------------------------------------------------------------------------------------
# Build


def _source_digest() -> str:
    """Changes whenever the builder, the perturbation engine or the corpus assets change."""
    h = hashlib.sha256(BUILDER_VERSION.encode())
    files = [Path(__file__), Path(__file__).with_name("perturb.py"), *sorted(CORPUS_DIR.glob("*"))]
    for path in files:
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def build_demo(root: Path, seed: int = 0) -> Path:
    """Write the demo corpus in Spider format under `root` and return `root`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    specs = load_database_specs()
    hand = json.loads((CORPUS_DIR / "hand_written.json").read_text())["questions"]
    tables, train, dev, dev_difficulty, hand_by_index = [], [], [], [], {}
    db_paths = {}
    split_rng = random.Random(f"split:{seed}")
    for db_id, db in specs.items():
        path = root / "database" / db_id / f"{db_id}.sqlite"
        write_database(db, generate_rows(db, seed), path)
        db_paths[db_id] = path
        tables.append(spider_table_entry(db))
        conn = sqlite3.connect(path)
        try:
            for gq in generate_questions(db, conn, seed):
                record = {"db_id": db_id, "question": gq.question, "query": gq.query}
                if split_rng.random() < DEV_FRACTION:
                    dev.append(record)
                    dev_difficulty.append(_template_difficulty(gq.template))
                else:
                    train.append(record)
            for item in (h for h in hand if h["db_id"] == db_id):
                for sql in [item["query"], *item["right"], *item["wrong"]]:
                    conn.execute(sql).fetchall()  # hand-written SQL must at least run
                if not _non_empty(conn, item["query"]):
                    raise ValueError(f"hand-written gold returns nothing: {item['query']}")
                hand_by_index[len(dev)] = item
                dev.append({"db_id": db_id, "question": item["question"], "query": item["query"]})
                dev_difficulty.append(item.get("difficulty", 0.5))
        finally:
            conn.close()
    (root / "tables.json").write_text(json.dumps(tables, indent=1))
    (root / "train.json").write_text(json.dumps(train, indent=1))
    (root / "dev.json").write_text(json.dumps(dev, indent=1))
    schemas = {t["db_id"]: t for t in tables}
    predictions = make_predictions(dev, schemas, db_paths, dev_difficulty, hand_by_index, seed)
    (root / "predictions").mkdir(exist_ok=True)
    for system, rows in predictions.items():
        with open(root / "predictions" / f"{system}.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    (root / "VERSION").write_text(_source_digest() + "\n")
    return root


def demo_root() -> Path:
    """The demo corpus, built once into <cache>/demo and rebuilt when the builder changes."""
    root = project_cache_dir("demo")
    version = root / "VERSION"
    if version.exists() and version.read_text().strip() == _source_digest():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap it in, so concurrent builders never see half a corpus.
    tmp = Path(tempfile.mkdtemp(prefix="demo-", dir=root.parent))
    build_demo(tmp)
    if version.exists() and version.read_text().strip() == _source_digest():
        shutil.rmtree(tmp)  # another process finished first
        return root
    old = root.with_name(f"demo-old-{os.getpid()}")
    if root.exists():
        root.rename(old)
    try:
        tmp.rename(root)
    except OSError:  # lost a race to another builder; theirs is equally good
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return root
