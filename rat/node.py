"""`Node`: the one immutable node type of relational algebra trees (RATs)."""

from collections.abc import Iterable

from rat.hashing import combine


class Node:
    """A RAT node: a label and an ordered tuple of children.

    Leaves are tables (``singer``), columns (``singer.name``) and values (``'France'``, ``10``);
    inner nodes are operators (``Project``, ``Selection``, ``Eq``, ...). Nodes compare equal
    when their hashes do, i.e. up to commutativity (see `rat.hashing`).

    >>> a = Node("Eq", (Node("t.c"), Node("1")))
    >>> b = Node("Eq", (Node("1"), Node("t.c")))
    >>> a == b, a.label, [n.label for n in a.postorder()]
    (True, 'Eq', ['t.c', '1', 'Eq'])
    >>> len(a.hash)
    32
    """

    __slots__ = ("_hash", "children", "label")

    def __init__(self, label: str, children: Iterable["Node"] = ()):
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "children", tuple(children))
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"Node is immutable (tried to set {name!r})")

    @property
    def hash(self) -> str:
        """Hex digest of this subtree, computed bottom-up once and cached."""
        cached = self._hash
        if cached is None:
            cached = combine(self.label, [child.hash for child in self.children])
            object.__setattr__(self, "_hash", cached)
        return cached

    def postorder(self) -> list["Node"]:
        """All nodes of the subtree, children before parents (left to right)."""
        nodes: list[Node] = []

        def visit(node: Node) -> None:
            for child in node.children:
                visit(child)
            nodes.append(node)

        visit(self)
        return nodes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.hash == other.hash

    def __hash__(self) -> int:
        return hash(self.hash)

    def __repr__(self) -> str:
        from rat.serialize import serialize

        return f"Node({serialize(self)!r})"

    def __reduce__(self):
        return (Node, (self.label, self.children))
