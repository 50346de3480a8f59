"""rat: SQL -> canonical relational algebra trees (RATs), commutativity-aware node labels,
and a token-alignment baseline.

>>> import rat
>>> pred = rat.to_tree("SELECT name FROM singer WHERE age > 20")
>>> gold = rat.to_tree("SELECT name FROM singer WHERE age >= 20")
>>> rat.serialize(pred)
'((singer.name)(((singer.age)(20)Gt)(singer)Selection)Project)'
>>> rat.label_nodes(pred, gold)
[1, 1, 1, 0, 1, 0, 0]
"""

from rat.align import align_tokens
from rat.canonicalize import canonicalize
from rat.errors import RATError
from rat.labels import label_nodes
from rat.node import Node
from rat.schema import Schema
from rat.serialize import node_ends, serialize
from rat.tree import to_tree

__all__ = [
    "Node",
    "RATError",
    "Schema",
    "align_tokens",
    "canonicalize",
    "label_nodes",
    "node_ends",
    "serialize",
    "to_tree",
]
