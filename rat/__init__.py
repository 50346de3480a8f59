"""rat: SQL -> canonical relational algebra trees (RATs), commutativity-aware node labels,
what each node denotes, where it lies in the SQL text, and a token-alignment baseline.

>>> import rat
>>> pred = rat.to_tree("SELECT name FROM singer WHERE age > 20")
>>> gold = rat.to_tree("SELECT name FROM singer WHERE age >= 20")
>>> rat.serialize(pred)
'((singer.name)(((singer.age)(20)Gt)(singer)Selection)Project)'
>>> rat.label_nodes(pred, gold)
[1, 1, 1, 0, 1, 0, 0]
>>> [rat.node_kind(n) for n in pred.postorder()]
['column', 'column', 'value', 'operator', 'table', 'relation', 'relation']
>>> spans = rat.sql_spans("SELECT name FROM singer WHERE age > 20", pred)
>>> spans.text(3)
'singer.age > 20'
"""

from rat import build  # noqa: F401 - first: RAT_SQLGLOT=pure acts before sqlglot loads
from rat.align import align_tokens
from rat.canonicalize import canonicalize
from rat.dialects import DIALECTS
from rat.errors import ParseError, RATError
from rat.kinds import node_kind
from rat.labels import label_nodes
from rat.node import Node
from rat.schema import Schema
from rat.serialize import node_ends, serialize
from rat.spans import SqlSpans, sql_spans
from rat.tree import to_tree

__all__ = [
    "DIALECTS",
    "Node",
    "ParseError",
    "RATError",
    "Schema",
    "SqlSpans",
    "align_tokens",
    "canonicalize",
    "label_nodes",
    "node_ends",
    "node_kind",
    "serialize",
    "sql_spans",
    "to_tree",
]
