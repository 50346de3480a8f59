"""The demo databases: specs from `demo_corpus/schemas.json`, seeded rows, SQLite files and
their Spider `tables.json` entries."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parents[1] / "demo_corpus"

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
