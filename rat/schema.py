"""Database schemas: tables, columns and keys, built from Spider/BIRD `tables.json` entries."""

from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False)
class Schema:
    """Tables and their columns (all names lowercased), keys and column types.

    `primary_keys` and `column_types` use ``"table.column"`` names; `foreign_keys` are
    ``("table.column", "other_table.column")`` pairs.

    >>> s = Schema({"Singer": ["Singer_ID", "Name"], "concert": ["concert_ID", "singer_id"]})
    >>> s.tables["singer"]
    ('singer_id', 'name')
    >>> s.tables_with_column("singer_id")
    ('singer', 'concert')
    """

    tables: dict[str, tuple[str, ...]]
    primary_keys: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str], ...] = ()
    column_types: dict[str, str] = field(default_factory=dict)
    db_id: str = ""
    _column_index: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _column_sets: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tables = {t.lower(): tuple(c.lower() for c in cols) for t, cols in self.tables.items()}
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "primary_keys", tuple(k.lower() for k in self.primary_keys))
        object.__setattr__(
            self, "foreign_keys", tuple((a.lower(), b.lower()) for a, b in self.foreign_keys)
        )
        object.__setattr__(
            self, "column_types", {k.lower(): v for k, v in self.column_types.items()}
        )
        index: dict[str, list[str]] = {}
        for table, columns in tables.items():
            for column in columns:
                index.setdefault(column, []).append(table)
        object.__setattr__(self, "_column_index", {c: tuple(t) for c, t in index.items()})
        # Made once: canonicalising looks up the columns of every table a query reads.
        object.__setattr__(self, "_column_sets", {t: frozenset(c) for t, c in tables.items()})

    def columns(self, table: str) -> frozenset[str] | None:
        """The columns of `table` (lowercased name), or None if the schema lacks it."""
        return self._column_sets.get(table)

    def tables_with_column(self, column: str) -> tuple[str, ...]:
        """Every table that has a column named `column` (lowercased)."""
        return self._column_index.get(column, ())

    @classmethod
    def from_spider(cls, entry: dict) -> "Schema":
        """Build from one entry of Spider's `tables.json` or BIRD's `dev_tables.json`.

        Uses the ``*_original`` names (the ones SQL refers to), lowercased.

        >>> entry = {"db_id": "d", "table_names_original": ["People"],
        ...          "column_names_original": [[-1, "*"], [0, "People_ID"], [0, "Name"]],
        ...          "column_types": ["text", "number", "text"], "primary_keys": [1],
        ...          "foreign_keys": []}
        >>> s = Schema.from_spider(entry)
        >>> s.tables, s.primary_keys, s.column_types["people.name"]
        ({'people': ('people_id', 'name')}, ('people.people_id',), 'text')
        """
        table_names = [t.lower() for t in entry["table_names_original"]]
        tables: dict[str, list[str]] = {t: [] for t in table_names}
        qualified: list[str | None] = []
        for table_index, column in entry["column_names_original"]:
            if table_index < 0:
                qualified.append(None)
                continue
            table = table_names[table_index]
            tables[table].append(column.lower())
            qualified.append(f"{table}.{column.lower()}")
        types = entry.get("column_types", [])
        column_types = {q: types[i] for i, q in enumerate(qualified) if q and i < len(types)}
        primary_keys: list[str] = []
        for key in entry.get("primary_keys", []):
            # BIRD lists a composite key as a nested list of column indices.
            for index in key if isinstance(key, list) else [key]:
                if qualified[index]:
                    primary_keys.append(qualified[index])
        foreign_keys = [
            (qualified[a], qualified[b])
            for a, b in entry.get("foreign_keys", [])
            if qualified[a] and qualified[b]
        ]
        return cls(
            {t: tuple(c) for t, c in tables.items()},
            tuple(primary_keys),
            tuple(foreign_keys),
            column_types,
            db_id=entry.get("db_id", ""),
        )
