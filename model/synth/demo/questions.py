"""Questions from templates: every template turns a table (or a foreign key) of a demo
database into (question, gold SQL) pairs; golds that return nothing are dropped."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from model.synth.demo.databases import Database, Table

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


def non_empty(conn: sqlite3.Connection, sql: str) -> bool:
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
            if kept == per_template or sql in seen or not non_empty(conn, sql):
                continue
            seen.add(sql)
            questions.append(GoldQuestion(db.db_id, question, sql, name))
            kept += 1
    return questions
