"""Commutativity-aware structural hashes of RAT nodes (hashlib, identical across processes).

A node's hash combines its label with its children's hashes; children of commutative
operators are sorted first, and comparisons are oriented canonically (`x > 10` is `10 < x`).
For labelling, an expression under Val_list, Orderby_*, Project, Limit or Groupby also carries
its parent's label (`contextual_hashes`), so that e.g. a column in SELECT never matches the same
column in WHERE by accident. The input relation of those operators (their last child) is
exempt: the paper applies the parent label to it too, which marks a correct projection as
incorrect whenever only the ORDER BY direction or the LIMIT around it is wrong.
"""

from hashlib import blake2b
from typing import TYPE_CHECKING

from rat.kinds import node_kind

if TYPE_CHECKING:
    from rat.node import Node

COMMUTATIVE = frozenset(
    {"Eq", "Neq", "Add", "Mul", "And", "Or", "Xor", "Union", "Union_all", "Intersect", "Intersect_all", "Product",
     "Val_list", "Groupby", "Distinct_on", "Partitionby", "Grouping_sets", "Cube", "Exclude"}
)
# Mirror image of each ordered comparison: `a < b` is `b > a`.
MIRRORED = {"Lt": "Gt", "Gt": "Lt", "Lte": "Gte", "Gte": "Lte"}
# Parents whose children are labelled in their context: the context's name (a limit's count is
# a limit's, WITH TIES or not, a sort key a sort key, NULLS LAST or not: there the operator is
# what differs).
CONTEXT_PARENTS = {
    **{label: label for label in ("Val_list", "Orderby_asc", "Orderby_desc", "Project", "Limit", "Groupby",
                                  "Distinct_on", "Exclude")},
    **dict.fromkeys(("Limit_percent", "Limit_with_ties", "Limit_percent_with_ties"), "Limit"),
    **dict.fromkeys(("Orderby_asc_nulls_first", "Orderby_asc_nulls_last"), "Orderby_asc"),
    **dict.fromkeys(("Orderby_desc_nulls_first", "Orderby_desc_nulls_last"), "Orderby_desc"),
}


def is_relation(node: "Node", parent: "Node | None" = None) -> bool:
    """Whether `node` (a child of `parent`, if given) denotes a relation: a relational
    operator or a table (see `rat.kinds.node_kind`).

    >>> from rat.node import Node
    >>> [is_relation(Node(x)) for x in ("singer", "singer.name", "'x'", "1e5", "current_time")]
    [True, False, False, False, False]
    """
    return node_kind(node, parent) in ("relation", "table")


def _digest(text: str) -> str:
    # surrogatepass: a label may hold a lone surrogate (a command-line argument's undecodable
    # byte, as Python passes it on); valid text encodes as before
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def combine(label: str, child_hashes: list[str]) -> str:
    """Hash of a node from its label and its children's hashes.

    >>> combine("Add", ["a", "b"]) == combine("Add", ["b", "a"])
    True
    >>> combine("Sub", ["a", "b"]) == combine("Sub", ["b", "a"])
    False
    >>> combine("Gt", ["x", "10"]) == combine("Lt", ["10", "x"])
    True
    """
    if not child_hashes:
        return _digest(label)
    if label in COMMUTATIVE:
        child_hashes = sorted(child_hashes)
    elif label in MIRRORED and len(child_hashes) == 2 and child_hashes[1] < child_hashes[0]:
        label = MIRRORED[label]
        child_hashes = [child_hashes[1], child_hashes[0]]
    return _digest(label + "(" + ",".join(child_hashes) + ")")


def contextual_hashes(tree: "Node") -> list[str]:
    """For each node of `tree` in post-order, the hash used for labelling: its own hash,
    combined with its parent's label when the parent is in CONTEXT_PARENTS.

    >>> from rat.node import Node
    >>> c = Node("t.c")
    >>> project, where = Node("Project", (c, Node("t"))), Node("Eq", (c, Node("1")))
    >>> contextual_hashes(project)[0] == contextual_hashes(where)[0]
    False
    >>> contextual_hashes(where)[0] == c.hash
    True
    >>> contextual_hashes(project)[1] == Node("t").hash  # the input relation is exempt
    True
    """
    hashes: list[str] = []
    # Iterative post-order walk (deep trees must not hit the recursion limit); each entry is
    # (node, the parent label to combine with, whether its children are already queued).
    stack: list[tuple[Node, str | None, bool]] = [(tree, None, False)]
    while stack:
        node, parent_label, expanded = stack.pop()
        if expanded:
            if parent_label is not None:
                hashes.append(_digest(parent_label + ">" + node.hash))
            else:
                hashes.append(node.hash)
            continue
        stack.append((node, parent_label, True))
        children = node.children
        context = CONTEXT_PARENTS.get(node.label)
        last = len(children) - 1
        for i in range(last, -1, -1):
            child = children[i]
            relation_input = i == last and context != "Val_list" and is_relation(child, node)
            stack.append((child, None if relation_input else context, False))
    return hashes
