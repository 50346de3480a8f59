"""Database schemas: tables, columns and keys, built from Spider/BIRD `tables.json` entries."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False)
class Schema:
    """Tables and their columns (all names lowercased), keys and column types.

    `primary_keys` and `column_types` use ``"table.column"`` names; `foreign_keys` are
    ``("table.column", "other_table.column")`` pairs. `table_schemas` names the schema each
    table is read from (a PostgreSQL or DuckDB schema, MySQL's database, DDL's ``sales.t``): a
    query's ``s.t`` with another schema ``s`` reads another table, and `rat.to_tree` keeps it
    apart (``In_schema(t, s)``, its columns ``s.t.c``), with the columns of the table named
    ``"s.t"`` where `tables` has it; without `table_schemas` (tables.json, a mapping) a table's
    schema is dropped.

    >>> s = Schema({"Singer": ["Singer_ID", "Name"], "concert": ["concert_ID", "singer_id"]})
    >>> s.tables["singer"]
    ('singer_id', 'name')
    >>> s.tables_with_column("singer_id")
    ('singer', 'concert')
    >>> s = Schema({"orders": ["id"], "archive.orders": ["id", "closed"]}, table_schemas={"orders": "public"})
    >>> s.source("archive.orders.closed"), s.source("orders.closed")
    ('archive.orders.closed', None)
    """

    tables: dict[str, tuple[str, ...]]
    primary_keys: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str], ...] = ()
    column_types: dict[str, str] = field(default_factory=dict)
    db_id: str = ""
    table_schemas: dict[str, str] = field(default_factory=dict)
    _column_index: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _column_sets: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_fields(self)
        # two spellings of one lower-case name would merge (a view's repeated output name stays)
        _one_each(list(self.tables), "schema: tables")
        for table, cols in self.tables.items():
            _one_each(list(dict.fromkeys(cols)), f"schema: the columns of table {table!r}")
        tables = {t.lower(): tuple(c.lower() for c in cols) for t, cols in self.tables.items()}
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "primary_keys", tuple(k.lower() for k in self.primary_keys))
        object.__setattr__(
            self, "foreign_keys", tuple((a.lower(), b.lower()) for a, b in self.foreign_keys)
        )
        object.__setattr__(
            self, "column_types", {k.lower(): v for k, v in self.column_types.items()}
        )
        object.__setattr__(
            self, "table_schemas", {k.lower(): v.lower() for k, v in self.table_schemas.items()}
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

    def source(self, column: str) -> str | None:
        """The schema's ``table.column`` that a column label of a canonical tree reads, or None.

        `rat.to_tree` qualifies a self-join's later occurrences of ``t`` as ``t_2``, ``t_3``, ...
        (`qualifiers`), so ``t_2.a`` reads ``t.a``; a qualifier that is a table of the schema
        (``sales_2023``) is that table. None for a column the schema lacks, an unqualified or
        ``*`` column, and a subquery's or CTE's (``derived.a``, `is_derived`).

        >>> s = Schema({"t": ["a", "b"], "sales_2023": ["z"], "sales": ["region"]})
        >>> [s.source(c) for c in ("t.a", "t_2.b", "t_3.a", "sales_2023.z", "sales_2023_2.z")]
        ['t.a', 't.b', 't.a', 'sales_2023.z', 'sales_2023.z']
        >>> [s.source(c) for c in ("sales_2023.region", "t.zzz", "derived.a", "a")]
        [None, None, None, None]
        """
        if type(column) is not str and not isinstance(column, str):
            raise TypeError(f"column: expected a column label (str), found {type(column).__name__}")
        table, _, name = column.rpartition(".")
        if not table:
            return None
        for candidate in self.tables_of(table):
            if name in self._column_sets.get(candidate, ()):
                return f"{candidate}.{name}"
        return None

    def tables_of(self, qualifier: str) -> list[str]:
        """The tables a column qualifier of a canonical tree may stand for, nearest first: a
        table of the schema is itself; any other name as `qualifiers` reads it (``t_2``: ``t``).

        >>> s = Schema({"t": ["a"], "sales_2023": ["z"], "sales": ["region"]})
        >>> s.tables_of("sales_2023"), s.tables_of("t_2")
        (['sales_2023'], ['t_2', 't'])
        """
        return [qualifier] if qualifier in self._column_sets else qualifiers(qualifier)

    @classmethod
    def of(cls, schema: "Schema | Mapping | None", db_id: str = "") -> "Schema | None":
        """A `Schema` from a Schema (itself), a `tables.json` entry (`from_spider`), a mapping
        ``{table: [columns]}`` (named `db_id`) or None (None); `TypeError` for anything else.

        >>> Schema.of({"Singer": ["Name"]}).tables
        {'singer': ('name',)}
        >>> Schema.of({"singer": "name"})
        Traceback (most recent call last):
        ...
        TypeError: schema: table 'singer': expected a list of column names, found str
        """
        if schema is None or isinstance(schema, Schema):
            return schema
        if isinstance(schema, Mapping) and "table_names_original" in schema:
            return cls.from_spider(schema)
        if isinstance(schema, Mapping):
            tables, table_schemas = _schema_qualified(dict(schema))
            return cls(tables, db_id=db_id, table_schemas=table_schemas)
        raise TypeError(f"schema: expected a rat.Schema, a tables.json entry or a mapping of table -> "
                        f"columns, found {type(schema).__name__}")

    @classmethod
    def from_spider(cls, entry: Mapping) -> "Schema":
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
        if not isinstance(entry, Mapping):
            raise TypeError(f"schema: expected a tables.json entry (an object), found {type(entry).__name__}")
        missing = [k for k in ("table_names_original", "column_names_original") if k not in entry]
        if missing:
            raise ValueError(f"schema: the tables.json entry has no {missing[0]!r}")
        try:
            return cls._from_spider(entry)
        except (IndexError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"schema: a malformed tables.json entry ({type(error).__name__}: "
                             f"{str(error)[:100]})") from None

    @classmethod
    def _from_spider(cls, entry: Mapping) -> "Schema":
        table_names = [t.lower() for t in _one_each(_strings(entry["table_names_original"], "table_names_original"),
                                                   "table_names_original")]
        tables: dict[str, list[str]] = {t: [] for t in table_names}
        qualified: list[str | None] = []
        for table_index, column in entry["column_names_original"]:
            _index(table_index, len(table_names), "column_names_original: a table index", "table_names_original",
                   star=True)
            if not isinstance(column, str):
                raise TypeError(f"column_names_original: column names must be strings, found {type(column).__name__}")
            if table_index < 0:
                qualified.append(None)
                continue
            table = table_names[table_index]
            tables[table].append(column)  # (Schema reads every name in lower case)
            qualified.append(f"{table}.{column.lower()}")
        for table, columns in tables.items():
            _one_each(columns, f"the columns of table {table!r}")
        types = _strings(entry.get("column_types", []), "column_types")
        column_types = {q: types[i] for i, q in enumerate(qualified) if q and i < len(types)}
        primary_keys: list[str] = []
        for key in entry.get("primary_keys", []):
            # BIRD lists a composite key as a nested list of column indices.
            for index in key if isinstance(key, list) else [key]:
                if qualified[_index(index, len(qualified), "primary_keys", "column_names_original")]:
                    primary_keys.append(qualified[index])
        foreign_keys = [
            (qualified[a], qualified[b])
            for a, b in entry.get("foreign_keys", [])
            if qualified[_index(a, len(qualified), "foreign_keys", "column_names_original")]
            and qualified[_index(b, len(qualified), "foreign_keys", "column_names_original")]
        ]
        return cls(
            {t: tuple(c) for t, c in tables.items()},
            tuple(primary_keys),
            tuple(foreign_keys),
            column_types,
            db_id=entry.get("db_id", ""),
        )


def _schema_qualified(tables: dict) -> tuple[dict, dict[str, str]]:
    """A mapping's tables and where each is read from (`Schema.table_schemas`): a key
    ``"sales.orders"`` is the table orders of schema sales, read as a DDL file's is
    (``model.data.databases.schema_from_ddl``): a name written without its schema is the key
    without one, else the first schema by name that has it; the others keep their ``s.t`` key.

    >>> _schema_qualified({"sales.orders": ["a"], "finance.orders": ["b"], "sales.customers": ["c"]})
    ({'sales.orders': ['a'], 'orders': ['b'], 'customers': ['c']}, {'orders': 'finance', 'customers': 'sales'})
    """
    if not all(isinstance(k, str) for k in tables) or not any("." in k for k in tables):
        return tables, {}  # (a key not a string: `_check_fields` says so)
    found: dict[str, list[str]] = {}
    for key in tables:
        schema, _, table = key.lower().rpartition(".")
        found.setdefault(table, []).append(schema)
    chosen = {table: min(schemas) for table, schemas in found.items()}  # ("": the key without one)
    read: dict = {}
    table_schemas: dict[str, str] = {}
    for key, columns in tables.items():
        schema, _, table = key.rpartition(".")
        if schema.lower() != chosen[table.lower()]:
            read[key] = columns
            continue
        read[table] = columns
        if schema:
            table_schemas[table] = schema
    return read, table_schemas


def _strings(value, what: str) -> list[str]:
    """`value`, a list of strings; a `TypeError` naming `what` otherwise (a string is no list:
    its letters would be read as names)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what}: expected a list of strings")
    return value


def _one_each(names: list[str], what: str) -> list[str]:
    """`names`; a `ValueError` naming `what` for two of them that are one in lower case (rat
    reads names in lower case: two tables ``People`` and ``people`` would merge)."""
    seen: dict[str, str] = {}
    for name in names:
        if name.lower() in seen:
            raise ValueError(f"{what}: {seen[name.lower()]!r} and {name!r} are one name in lower case")
        seen[name.lower()] = name
    return names


def _index(value, size: int, what: str, of: str, star: bool = False) -> int:
    """`value`, an index into `of`, a list of `size` (-1 too where `star`: Spider's ``*``
    column); a `ValueError` naming `what` otherwise (a negative index would read from the end)."""
    if isinstance(value, bool) or not isinstance(value, int) or not (-1 if star else 0) <= value < size:
        raise ValueError(f"{what}: {value!r} is not an index of {of} ({size} entries)")
    return value


_DERIVED = re.compile(r"derived(?:_[0-9]+)*")


def qualifiers(qualifier: str) -> list[str]:
    """The names a column qualifier of a canonical tree may stand for, nearest first: itself,
    then for a self-join's k-th occurrence of ``t`` (written ``t_k``), ``t``.

    >>> qualifiers("t_2_2"), qualifiers("orders")
    (['t_2_2', 't_2', 't'], ['orders'])
    """
    names = [qualifier]
    while True:
        base, _, k = names[-1].rpartition("_")
        if not (base and k.isdigit()):
            return names
        names.append(base)


def is_derived(qualifier: str) -> bool:
    """Whether a column qualifier of a canonical tree names a subquery or CTE read in FROM
    (``derived``, ``derived_2``, ...: `rat.canonicalize`) rather than a table.

    >>> is_derived("derived_2"), is_derived("orders")
    (True, False)
    """
    return _DERIVED.fullmatch(qualifier) is not None


def _check_fields(schema: Schema) -> None:
    """`TypeError` naming the first field of `schema` that is not of its documented type."""
    def names(value, what: str) -> None:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"schema: {what}: expected a list of column names, found {type(value).__name__}")
        odd = [v for v in value if not isinstance(v, str)]
        if odd:
            raise TypeError(f"schema: {what}: column names must be strings, found {type(odd[0]).__name__}")

    if not isinstance(schema.tables, Mapping):
        raise TypeError(f"schema: expected a mapping of table -> columns, found {type(schema.tables).__name__}")
    for table, columns in schema.tables.items():
        if not isinstance(table, str):
            raise TypeError(f"schema: table names must be strings, found {type(table).__name__}")
        names(columns, f"table {table!r}")
    if not isinstance(schema.primary_keys, (list, tuple)) or \
            not all(isinstance(k, str) for k in schema.primary_keys):
        raise TypeError("schema: primary_keys: expected a list of 'table.column' names")
    if not isinstance(schema.foreign_keys, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(c, str) for c in p)
               for p in schema.foreign_keys):
        raise TypeError("schema: foreign_keys: expected ('table.column', 'table.column') pairs")
    if not isinstance(schema.column_types, Mapping) or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in schema.column_types.items()):
        raise TypeError("schema: column_types: expected a mapping of 'table.column' -> type name")
    if not isinstance(schema.table_schemas, Mapping) or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in schema.table_schemas.items()):
        raise TypeError("schema: table_schemas: expected a mapping of table -> schema name")
    if not isinstance(schema.db_id, str):
        raise TypeError(f"schema: db_id: expected a string, found {type(schema.db_id).__name__}")
