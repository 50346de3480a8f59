"""The SQL dialects `rat` reads, and the differences between them that change what a query
means (docs/rat.md, "Dialects", has the table).

Each dialect names the sqlglot dialect that parses it and facts about its meaning, among them:

- ``like_ignores_case``: whether ``LIKE`` ignores ASCII case by default (SQLite; MySQL and SQL
  Server under their default collations). None of these has ``ILIKE``; where a dialect has it,
  it is a node of its own (``Ilike``), never equal to ``Like``.
- ``unquoted_case``: None where identifiers ignore case, quoted or not; ``"lower"`` /
  ``"upper"`` where unquoted names are folded to that case and quoted names keep theirs
  (PostgreSQL / Snowflake). A name that means something else than its unquoted lowercase
  spelling keeps its case and its double quotes in the tree's labels: ``singer."Name"``.
- ``double_quoted_strings``: SQLite reads ``"x"`` that names no column as the string 'x'.
- ``concat_skips_nulls``: ``concat(a, b)`` skips a NULL argument (SQLite 3.44's, PostgreSQL's,
  SQL Server's, DuckDB's), where ``a || b`` is NULL: ``Concat_skip_nulls``, not ``Concat``.

>>> dialect("postgres").like_ignores_case, dialect("SQLite").like_ignores_case
(False, True)
>>> dialect("oracle")
Traceback (most recent call last):
rat.errors.RATError: unknown dialect 'oracle' (known: bigquery, databricks, duckdb, mysql, postgres, redshift, snowflake, sqlite, trino, tsql)
"""

from dataclasses import dataclass

from rat.errors import RATError

__all__ = ["DIALECTS", "Dialect", "dialect"]


@dataclass(frozen=True)
class Dialect:
    name: str
    like_ignores_case: bool
    unquoted_case: str | None = None
    double_quoted_strings: bool = False
    distinct_on: bool = False  # SELECT DISTINCT ON (..)
    qualify: bool = False  # QUALIFY <condition on window results>
    lateral: str = ""  # how it reads a FROM item reading the ones before it: "LATERAL", "CROSS APPLY"
    ignore_nulls: bool = False  # a window function's IGNORE NULLS
    at_time_zone: bool = True  # ts AT TIME ZONE 'UTC'
    json_operators: bool = True  # a -> 'k', a ->> 'k'
    pivot: bool = False  # t PIVOT (agg(v) FOR k IN (..))
    between_symmetric: bool = False  # x BETWEEN SYMMETRIC a AND b
    semi_join: bool = False  # a SEMI JOIN b / a ANTI JOIN b: a's rows with / without a match in b
    group_by_all: bool = False  # GROUP BY ALL: by the SELECT's expressions without an aggregate
    order_by_all: bool = False  # ORDER BY ALL: by the SELECT's expressions, left to right
    star_exclude: bool = False  # SELECT * EXCLUDE (a) (BigQuery: * EXCEPT (a))
    star_replace: bool = False  # SELECT * REPLACE (upper(a) AS a)
    with_ties: bool = False  # FETCH FIRST n ROWS WITH TIES / TOP n WITH TIES
    limit_percent: bool = False  # TOP n PERCENT
    frame_exclude: bool = False  # a window frame's EXCLUDE CURRENT ROW / GROUP / TIES
    jsonb_keys: bool = False  # jsonb's j ? 'k', j ?| array[..], j ?& array[..]
    table_sample: bool = False  # t TABLESAMPLE SYSTEM (10) (Snowflake: t SAMPLE (10))
    lateral_view: bool = False  # FROM t LATERAL VIEW explode(t.a) v AS x (Spark's, Hive's)
    using_sample: bool = False  # a query's USING SAMPLE 10% (DuckDB's: of its FROM clause's rows)
    positional_join: bool = False  # a POSITIONAL JOIN b: rows paired by position (DuckDB's)
    asof_join: str = ""  # a ASOF JOIN b: "inner" (DuckDB: the rows with a match), "left" (Snowflake: every row of a)
    struct_fields: bool = False  # a struct column's field with a dot: `shipping.city`, `o.shipping.city`
    now: str = ""  # its function that is CURRENT_TIMESTAMP: now(), GETDATE() (SQLite has none)
    bitwise_xor: bool = True  # a ^ b (PostgreSQL: a # b; its `^`, DuckDB's and Redshift's, is a power;
    # SQL Server, BigQuery and Databricks have one, of a precedence rat does not read: refused)
    # Syntax sqlglot reads in every dialect, refused where the database would refuse it
    ilike: bool = False  # a ILIKE 'x%'
    cast_operator: bool = False  # a::int
    limit: bool = True  # LIMIT n (SQL Server: TOP n, OFFSET .. FETCH)
    full_join: bool = True  # a FULL [OUTER] JOIN b
    nulls_order: bool = True  # ORDER BY a NULLS FIRST / NULLS LAST
    intersect_all: bool = True  # INTERSECT ALL / EXCEPT ALL
    fetch_first: bool = True  # FETCH FIRST n ROWS ONLY
    null_safe_eq: bool = False  # a <=> b (MySQL's, Databricks')
    from_first: bool = False  # a query that begins with its FROM: FROM t, FROM t SELECT a
    trailing_comma: str = ""  # a list that ends in a comma: "select" (the SELECT list's), "any" (every list's)
    concat_skips_nulls: bool = False  # CONCAT(a, b) skips a NULL argument (`a || b` is NULL there)

    @property
    def case_sensitive(self) -> bool:
        """Whether quoted identifiers keep their case."""
        return self.unquoted_case is not None

    def label(self, name: str, quoted: bool) -> str:
        """The label of an identifier written `name` (canonical: lowercase where case does not
        matter), quoted or not.

        >>> [dialect("postgres").label(n, q) for n, q in [("Name", False), ("Name", True),
        ...                                               ("name", True)]]
        ['name', '"Name"', 'name']
        >>> [dialect("snowflake").label(n, q) for n, q in [("Name", False), ("NAME", True),
        ...                                                ("name", True)]]
        ['name', 'name', '"name"']
        """
        if not quoted or self.unquoted_case is None:
            return name.lower()
        folded = name.lower() if self.unquoted_case == "lower" else name.upper()
        return name.lower() if folded == name else '"' + name.replace('"', '""') + '"'


DIALECTS = {
    "sqlite": Dialect("sqlite", like_ignores_case=True, double_quoted_strings=True, at_time_zone=False,
                      frame_exclude=True, bitwise_xor=False, intersect_all=False, fetch_first=False,
                      concat_skips_nulls=True),  # (SQLite 3.44's concat())
    "postgres": Dialect("postgres", like_ignores_case=False, unquoted_case="lower",
                        distinct_on=True, lateral="LATERAL", now="now", between_symmetric=True, with_ties=True,
                        frame_exclude=True, jsonb_keys=True, table_sample=True, ilike=True, cast_operator=True,
                        concat_skips_nulls=True),
    "mysql": Dialect("mysql", like_ignores_case=True, lateral="LATERAL", at_time_zone=False, now="now",
                     full_join=False, nulls_order=False, fetch_first=False, null_safe_eq=True),
    "duckdb": Dialect("duckdb", like_ignores_case=False, distinct_on=True, qualify=True,
                      lateral="LATERAL", now="now", pivot=True, group_by_all=True, order_by_all=True,
                      semi_join=True, star_exclude=True, star_replace=True, asof_join="inner", frame_exclude=True,
                      table_sample=True, using_sample=True, positional_join=True, ilike=True, cast_operator=True,
                      bitwise_xor=False, from_first=True, trailing_comma="any", struct_fields=True,
                      concat_skips_nulls=True),
    "snowflake": Dialect("snowflake", like_ignores_case=False, unquoted_case="upper",
                         qualify=True, lateral="LATERAL", ignore_nulls=True, pivot=True,
                         group_by_all=True, star_exclude=True, star_replace=True, asof_join="left", table_sample=True,
                         ilike=True,
                         cast_operator=True, bitwise_xor=False, intersect_all=False, trailing_comma="select"),
    "bigquery": Dialect("bigquery", like_ignores_case=False, qualify=True, ignore_nulls=True, pivot=True,
                        group_by_all=True, star_exclude=True, star_replace=True, table_sample=True,
                        bitwise_xor=False, intersect_all=False, fetch_first=False, trailing_comma="select",
                        struct_fields=True),
    "tsql": Dialect("tsql", like_ignores_case=True, lateral="CROSS APPLY", ignore_nulls=True,
                    json_operators=False, now="getdate", pivot=True, with_ties=True, limit_percent=True,
                    table_sample=True, limit=False, nulls_order=False, intersect_all=False, bitwise_xor=False,
                    concat_skips_nulls=True),
    # Databricks SQL (Spark SQL): names ignore case, quoted in backticks or not
    "databricks": Dialect("databricks", like_ignores_case=False, qualify=True, lateral="LATERAL",
                          ignore_nulls=True, at_time_zone=False, json_operators=False, now="now", pivot=True,
                          semi_join=True, group_by_all=True, order_by_all=True, star_exclude=True,
                          table_sample=True, lateral_view=True, ilike=True, cast_operator=True, null_safe_eq=True,
                          bitwise_xor=False, fetch_first=False, struct_fields=True),
    # Trino (and Presto, Athena): names ignore case, quoted or not
    "trino": Dialect("trino", like_ignores_case=False, lateral="LATERAL", ignore_nulls=True,
                     json_operators=False, now="now", with_ties=True, table_sample=True, bitwise_xor=False,
                     struct_fields=True),
    # Redshift: names ignore case, quoted or not (enable_case_sensitive_identifier off, its default)
    "redshift": Dialect("redshift", like_ignores_case=False, qualify=True, ignore_nulls=True,
                        json_operators=False, now="getdate", pivot=True, ilike=True, cast_operator=True,
                        intersect_all=False, fetch_first=False, struct_fields=True),  # (its SUPER's navigation)
}
SQLITE = DIALECTS["sqlite"]


def dialect(name: "str | Dialect") -> Dialect:
    """The dialect called `name` (any case); an unknown name is a RATError naming the known, a
    name that is no string a TypeError."""
    if isinstance(name, Dialect):
        return name
    if not isinstance(name, str):
        raise TypeError(f"dialect: expected a dialect name (str), found {type(name).__name__}")
    found = DIALECTS.get(name.lower())
    if found is None:
        shown = repr(name) if len(name) <= 40 else f"of {len(name)} characters"
        raise RATError(f"unknown dialect {shown[:80]} (known: {', '.join(sorted(DIALECTS))})")
    return found
