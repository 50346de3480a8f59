"""Per-node correctness labels of a predicted RAT against the gold RAT."""

from rat.hashing import contextual_hashes
from rat.node import Node, check_node


def label_nodes(pred: Node, gold: Node, execution_match: bool = False) -> list[int]:
    """One label per node of `pred` in post-order: 1 iff a node with the same (contextual)
    hash occurs anywhere in `gold`; all 1 when `execution_match` is true.

    A node can be correct under an incorrect parent: in `c > 10` vs gold `c = 10`, the
    column and the value are correct, the comparison is not.

    >>> from rat.tree import to_tree
    >>> pred, gold = to_tree("SELECT a FROM t WHERE c > 10"), to_tree("SELECT a FROM t WHERE c = 10")
    >>> [n.label for n in pred.postorder()]
    ['t.a', 't.c', '10', 'Gt', 't', 'Selection', 'Project']
    >>> label_nodes(pred, gold)
    [1, 1, 1, 0, 1, 0, 0]
    >>> label_nodes(pred, gold, execution_match=True)
    [1, 1, 1, 1, 1, 1, 1]
    """
    check_node(pred, "pred")
    check_node(gold, "gold")
    if isinstance(execution_match, (str, bytes)) or execution_match not in (None, 0, 1):
        raise TypeError(f"execution_match: expected True or False, found {execution_match!r}")
    pred_hashes = contextual_hashes(pred)
    if execution_match:
        return [1] * len(pred_hashes)
    gold_hashes = set(contextual_hashes(gold))
    return [int(h in gold_hashes) for h in pred_hashes]


def labels_against_others(trees: dict[str, Node]) -> dict[str, dict[str, list[int]]]:
    """For each answer to one question, its node labels (``label_nodes``) against each other
    answer's tree: ``out[a][b][i]`` is 1 when node ``i`` of ``a``'s tree occurs in ``b``'s.

    >>> from rat.tree import to_tree
    >>> t = {"a": to_tree("SELECT x FROM t"), "b": to_tree("SELECT y FROM t")}
    >>> labels_against_others(t)["a"]
    {'b': [0, 1, 0]}
    """
    for name, tree in trees.items():
        check_node(tree, f"trees[{name!r}]")
    hashes = {name: contextual_hashes(tree) for name, tree in trees.items()}  # (each tree's once: k, not k², walks)
    sets = {name: set(found) for name, found in hashes.items()}
    return {a: {b: [int(h in sets[b]) for h in hashes[a]] for b in trees if b != a} for a in trees}
