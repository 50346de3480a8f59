"""What a RAT node denotes: a relation, a table, a column, a value or an operator, decided in
this one place from its label (and, for leaves, its parent when known).

Labels are what `rat.to_tree` writes: tables and columns lowercased (``singer``,
``singer.name``), values as SQLite literals (``'France'``, ``20``, ``-1.5``, ``1e5``) or
keywords (``null``, ``current_timestamp``), operators capitalised (``Eq``, ``Count``,
``Project``; also ``Random`` for a function called without arguments).
"""

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rat.node import Node

__all__ = ["KINDS", "RELATIONAL", "is_parameter", "node_kind"]

KINDS = ("relation", "table", "column", "value", "operator")

# Labels of relational operators: their results are relations, not values.
RELATIONAL = frozenset(
    {"Project", "Selection", "Product", "Left_join", "Right_join", "Full_join", "Semi_join",
     "Anti_join", "Asof_join", "Asof_left_join", "Positional_join", "Groupby", "Having", "Orderby_asc", "Orderby_desc",
     "Orderby_asc_nulls_first", "Orderby_asc_nulls_last", "Orderby_desc_nulls_first", "Orderby_desc_nulls_last",
     "Limit", "Limit_percent", "Limit_with_ties", "Limit_percent_with_ties", "Distinct", "Union",
     "Union_all", "Intersect", "Intersect_all", "Except", "Except_all", "Qualify", "Distinct_on",
     "Recursive", "In_schema", "Pivot", "Unpivot", "Unpivot_include_nulls", "Ordinality", "With_offset",
     "Sample_percent", "Sample_rows"}
)
# The first character of a query parameter's label: `$1`, `?`, `:id`, `@id`, `%(id)s`.
_PARAMETER_MARKS = frozenset("$?:@%")
# Leaves that are values although they are written as words.
_VALUE_WORDS = frozenset({"null", "true", "false", "current_timestamp", "current_date",
                          "current_time"})
# A numeric literal as `to_tree` writes it: `20`, `-1.5`, `1.`, `.5`, `1e5`, `2.5E-3`.
NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
# Operators whose last child is a type, collation, date part, interval unit, schema, argument
# name, full-text search mode or struct field's name, not a table or column.
_NAMED_ARGUMENT = frozenset({"Cast", "Collate", "Extract", "Interval", "In_schema", "Convert", "Named",
                             "Match_against", "Field"})
# Date functions that name their date part first (Snowflake's and SQL Server's DATEADD(day, ..),
# MySQL's TIMESTAMPDIFF(day, ..)) or last (BigQuery's DATE_DIFF(a, b, DAY)); date_trunc both
# ways: Snowflake writes the part first, BigQuery last. Kept in step with rat.canonicalize.
DATE_PART_FIRST = frozenset({"dateadd", "datediff", "datediff_big", "datepart", "datename", "datetrunc",
                             "timestampadd", "timestampdiff", "date_trunc", "date_part"})
DATE_PART_LAST = frozenset({"date_diff", "datetime_diff", "timestamp_diff", "time_diff", "date_trunc",
                            "datetime_trunc", "timestamp_trunc", "time_trunc", "last_day"})
# Relational operators every child of which is a relation (join conditions are operators).
_ALL_RELATIONS = frozenset({"Product", "Union", "Union_all", "Intersect", "Intersect_all", "Except",
                            "Except_all", "In_schema", "Positional_join"})
_JOINS = frozenset({"Left_join", "Right_join", "Full_join", "Semi_join", "Anti_join", "Asof_join",
                    "Asof_left_join"})


def is_parameter(label: str) -> bool:
    """Whether a leaf's label is a query parameter, a value the query is given when it runs
    (`$1`, `?`, `:id`, `@id`, `%(id)s`, `%s`).

    >>> [is_parameter(x) for x in ("$1", "?", ":id", "@id", "%s", "'$1'", "t.a", "1")]
    [True, True, True, True, True, False, False, False]
    """
    return label[:1] in _PARAMETER_MARKS


def node_kind(node: "Node", parent: "Node | None" = None) -> str:
    """One of `KINDS`: ``relation`` (a relational operator, or ``Recursion``: the rows a
    recursive CTE has made so far, read by its step), ``table``, ``column``, ``value``
    (a constant: literal, NULL, TRUE, ``current_timestamp``, the type of a CAST) or
    ``operator`` (any other inner node, or a function called without arguments).

    A bare lowercase word is a table, unless `parent` shows it in an expression position,
    where it is a column that could not be qualified (no schema, several tables).

    >>> from rat.node import Node
    >>> [node_kind(Node(x)) for x in ("singer", "singer.name", "*", "'x'", "-10", "1e5",
    ...                               "current_timestamp", "Random", "Recursion")]
    ['table', 'column', 'column', 'value', 'value', 'value', 'value', 'operator', 'relation']
    >>> cast = Node("Cast", (Node("t.a"), Node("real")))
    >>> node_kind(cast), node_kind(cast.children[1], cast)
    ('operator', 'value')
    >>> node_kind(Node("Offset", (Node("2"), Node("t")))), node_kind(Node("Offset", (Node("2"),)))
    ('relation', 'operator')
    >>> where = Node("Selection", (Node("Gt", (Node("age"), Node("20"))), Node("singer")))
    >>> node_kind(where), node_kind(Node("age"), where.children[0]), node_kind(Node("singer"), where)
    ('relation', 'column', 'table')
    """
    try:
        children, label = node.children, node.label
    except AttributeError:
        raise TypeError(f"node: expected a rat.Node, found {type(node).__name__}") from None
    if children:  # (`Offset(n, rows)` without a LIMIT is rows, as `Limit` is; `Limit`'s `Offset(n)` a value's)
        return "relation" if label in RELATIONAL or label == "Offset" and len(children) == 2 else "operator"
    if label == "Recursion":  # a recursive CTE's step reading the rows made so far
        return "relation"
    if label[:1] == "'" or label in _VALUE_WORDS or NUMBER.match(label) or is_parameter(label):
        return "value"
    if "." in label or label == "*":
        return "column"
    if label[:1].isupper():
        return "operator"  # `Random`, or an empty `Val_list`
    if parent is None:
        return "table"
    position = _position(node, parent)
    if parent.label in _NAMED_ARGUMENT and position == len(parent.children) - 1:
        return "value"
    function = parent.label.lower()  # a date part: a bare word (a column is qualified or unknown)
    if (function in DATE_PART_FIRST and position == 0) or \
            (function in DATE_PART_LAST and position == len(parent.children) - 1 and position > 0):
        return "value"
    if _in_relation_position(parent, position):
        return "table"
    return "column"


def _position(node: "Node", parent: "Node") -> int:
    for i, child in enumerate(parent.children):
        if child is node:
            return i
    for i, child in enumerate(parent.children):
        if child.label == node.label and not child.children:
            return i
    raise ValueError(f"{node.label!r} is not a child of {parent.label!r}")


def _in_relation_position(parent: "Node", position: int) -> bool:
    label = parent.label
    if label in _ALL_RELATIONS:
        # Product also holds the ON conditions of inner joins: operators, never bare words.
        return True
    if label in _JOINS:
        return position < 2
    # Every other relational operator takes its input relation last (a bare word there
    # without a FROM would be a column of nothing: SQLite refuses it).
    return label in RELATIONAL and position == len(parent.children) - 1
