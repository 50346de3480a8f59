"""Post-order serialisation of a RAT, the string the node model reads, and where each node
ends in it (the model scores a node at the token holding that node's last character)."""

from rat.node import Node, check_node


def _pieces(tree: Node) -> tuple[list[str], list[int]]:
    pieces: list[str] = []
    ends: list[int] = []
    length = 0
    # Iterative (a deep tree must not hit the recursion limit): a node is visited twice,
    # once to open its parenthesis and queue its children, once to close it.
    stack: list[tuple[Node, bool]] = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            pieces.append("(")
            length += 1
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.children))
            continue
        pieces.append(node.label)
        pieces.append(")")
        length += len(node.label) + 1
        ends.append(length - 1)
    return pieces, ends


def serialize(tree: Node) -> str:
    """`(children... label)` for every node, children first.

    >>> project = Node("Project", (Node("player.player_api_id"), Node("player")))
    >>> tree = Node("Limit", (Node("1"), Node("Orderby_desc", (Node("player.heaviness"), project))))
    >>> serialize(tree)
    '((1)((player.heaviness)((player.player_api_id)(player)Project)Orderby_desc)Limit)'
    """
    check_node(tree)
    return "".join(_pieces(tree)[0])


def node_ends(tree: Node) -> list[int]:
    """For each node in post-order, the index in `serialize(tree)` of its last character
    (its closing parenthesis).

    >>> tree = Node("Eq", (Node("t.c"), Node("1")))
    >>> text, ends = serialize(tree), node_ends(tree)
    >>> text, ends, [text[: e + 1] for e in ends][-1] == text
    ('((t.c)(1)Eq)', [5, 8, 11], True)
    """
    check_node(tree)
    return _pieces(tree)[1]
