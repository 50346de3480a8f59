"""`Node`: the one immutable node type of relational algebra trees (RATs)."""

from collections.abc import Iterable

from rat.hashing import combine


class Node:
    """A RAT node: a label and an ordered tuple of children.

    Leaves are tables (``singer``), columns (``singer.name``) and values (``'France'``, ``10``);
    inner nodes are operators (``Project``, ``Selection``, ``Eq``, ...). Nodes compare equal
    when their hashes do, i.e. up to commutativity (see `rat.hashing`). Every walk over a tree
    (hash, post-order, serialisation, pickling) is iterative, so a deep tree never hits
    Python's recursion limit.

    >>> a = Node("Eq", (Node("t.c"), Node("1")))
    >>> b = Node("Eq", (Node("1"), Node("t.c")))
    >>> a == b, a.label, [n.label for n in a.postorder()]
    (True, 'Eq', ['t.c', '1', 'Eq'])
    >>> len(a.hash)
    32
    >>> Node("Selection", (a, None))
    Traceback (most recent call last):
    TypeError: child 1 of 'Selection' is NoneType, not a Node
    """

    __slots__ = ("_depth", "_hash", "_size", "children", "label")

    def __init__(self, label: str, children: Iterable["Node"] = ()):
        # Runs for every node of every tree: plain loops and the slots' own setters (_SET_*).
        if type(label) is not str and not isinstance(label, str):
            raise TypeError(f"a Node label is a str, not {type(label).__name__}")
        depth = size = 1  # known when the node is made: depth() and size() are free
        if children:  # a leaf (most nodes) skips all of this
            if type(children) is not tuple:
                children = tuple(children)
            for child in children:
                if type(child) is not Node and not isinstance(child, Node):
                    i = children.index(child)
                    raise TypeError(f"child {i} of {label!r} is {type(child).__name__}, not a Node")
                if child._depth >= depth:
                    depth = child._depth + 1
                size += child._size
        else:
            children = ()
        _SET_LABEL(self, label)
        _SET_CHILDREN(self, children)
        _SET_HASH(self, None)
        _SET_DEPTH(self, depth)
        _SET_SIZE(self, size)

    def __setattr__(self, name, value):
        raise AttributeError(f"Node is immutable (tried to set {name!r})")

    @property
    def hash(self) -> str:
        """Hex digest of this subtree, computed bottom-up once and cached."""
        if self._hash is None:
            # Iteratively, and only into subtrees whose hash is not cached yet.
            stack = [self]
            while stack:
                node = stack[-1]
                pending = [child for child in node.children if child._hash is None]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                if node._hash is None:
                    digest = combine(node.label, [child._hash for child in node.children])
                    _SET_HASH(node, digest)
        return self._hash

    def postorder(self) -> list["Node"]:
        """All nodes of the subtree, children before parents (left to right)."""
        nodes: list[Node] = []
        stack: list[tuple[Node, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded or not node.children:
                nodes.append(node)
                continue
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.children))
        return nodes

    def depth(self) -> int:
        """Number of nodes on the longest root-to-leaf path (a leaf has depth 1).

        >>> Node("Not", (Node("Eq", (Node("t.c"), Node("1"))),)).depth()
        3
        """
        return self._depth

    def size(self) -> int:
        """Number of nodes, a subtree counted each time it occurs (a CTE read twice: twice).

        >>> Node("Not", (Node("Eq", (Node("t.c"), Node("1"))),)).size()
        4
        """
        return self._size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.hash == other.hash

    def __hash__(self) -> int:
        return hash(self.hash)

    def __repr__(self) -> str:
        from rat.serialize import serialize

        return f"Node({serialize(self)!r})"

    def __reduce__(self):
        # Flat post-order (label, number of children) pairs: pickle itself recurses into
        # nested arguments, which a deep tree would take past the recursion limit.
        return (_from_postorder, ([(n.label, len(n.children)) for n in self.postorder()],))


# Node.__setattr__ refuses every write: Node's own code writes through the slot descriptors.
_SET_LABEL, _SET_CHILDREN = Node.label.__set__, Node.children.__set__
_SET_HASH, _SET_DEPTH, _SET_SIZE = Node._hash.__set__, Node._depth.__set__, Node._size.__set__


def _from_postorder(entries: list[tuple[str, int]]) -> Node:
    """Rebuild a tree from `Node.__reduce__`'s flat post-order.

    >>> import pickle
    >>> tree = Node("Eq", (Node("t.c"), Node("1")))
    >>> copy = pickle.loads(pickle.dumps(tree))
    >>> copy == tree, repr(copy)
    (True, "Node('((t.c)(1)Eq)')")
    """
    stack: list[Node] = []
    for label, arity in entries:
        children = stack[len(stack) - arity:] if arity else ()
        if arity:
            del stack[len(stack) - arity:]
        stack.append(Node(label, children))
    if len(stack) != 1:
        raise ValueError(f"a flat post-order of {len(stack)} trees, expected one")
    return stack[0]


def check_node(value: object, name: str = "tree") -> None:
    """`TypeError` naming `name` unless `value` is a `Node` (the public functions' argument check)."""
    if not isinstance(value, Node):
        raise TypeError(f"{name}: expected a rat.Node (rat.to_tree), found {type(value).__name__}")
