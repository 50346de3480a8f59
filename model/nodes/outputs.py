"""The node predictions file, ``<run>/predictions/<split>.jsonl``: what every node scorer writes
(the neural node model, the boosted-tree scorer) and what ``evaluate.py``, the HTML report and
the whole-query combiners read. One JSON object a line, per (system, question):

``question_id``, ``db_id``, ``system``, ``sql``, ``split``, ``execution_match``; per node in
post-order ``node_types``, ``node_labels`` (1 = correct), ``node_confidences``; and the tree
itself: ``tree`` (``rat.serialize``, for people), ``node_names`` and ``node_arity`` (label and
number of children per node), from which ``tree_of`` rebuilds the ``rat.Node`` without parsing
the SQL again. Writers may add fields (``query_confidence``, ``site_scores``...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import rat
from model.data.jsonl import read_jsonl, write_jsonl

REQUIRED = ("question_id", "node_labels", "node_confidences")


def prediction_row(example, confidences: Sequence[float], split: str, **extra) -> dict:
    """The row of one example (a ``NodeExample`` or ``TokenizedExample``) and its node scores."""
    if len(confidences) != len(example.node_labels):
        raise ValueError(f"{example.question_id}: {len(confidences)} scores for "
                         f"{len(example.node_labels)} nodes")
    row = {
        "question_id": example.question_id, "db_id": example.db_id, "system": example.system,
        "sql": example.sql, "split": split, "execution_match": example.execution_match,
        "node_types": list(example.node_types),
        "node_labels": [int(x) for x in example.node_labels],
        "node_confidences": [round(float(c), 6) for c in confidences],
        "tree": getattr(example, "tree", None) or getattr(example, "tree_text", ""),
        "node_names": list(getattr(example, "node_names", [])),
        "node_arity": [int(a) for a in getattr(example, "node_arity", [])],
    }
    row.update(extra)
    return row


def write_predictions(path: str | Path, rows: Sequence[dict]) -> int:
    return write_jsonl(path, rows)


def check_rows(rows: Sequence[dict], skipped: Counter | None = None) -> list[dict]:
    """The rows usable as node predictions; a row without ``question_id`` or node confidences,
    or whose per-node lists disagree in length, is left out and counted in ``skipped``.

    >>> skipped = Counter()
    >>> ok = {"question_id": "q", "node_confidences": [0.5], "node_labels": [1]}
    >>> len(check_rows([ok, {"question_id": "q"}, {**ok, "node_labels": [1, 0]}], skipped)), dict(skipped)
    (1, {'missing node_labels': 1, 'node_labels length differs': 1})
    """
    kept = []
    for row in rows:
        missing = next((f for f in REQUIRED if f not in row), None)
        if missing:
            reason = f"missing {missing}"
        else:
            n = len(row["node_confidences"])
            reason = next((f"{f} length differs" for f in ("node_labels", "node_types", "node_names", "node_arity")
                           if row.get(f) and len(row[f]) != n), None)
        if reason:
            if skipped is not None:
                skipped[reason] += 1
            continue
        kept.append(row)
    return kept


def read_predictions(path: str | Path, skipped: Counter | None = None) -> list[dict]:
    """The usable rows of a node predictions file (``check_rows``; the others are counted)."""
    return check_rows(read_jsonl(path), skipped)


def tree_of(row: dict) -> rat.Node | None:
    """The predicted tree of a row, rebuilt from its post-order ``node_names`` and
    ``node_arity`` (None for rows written without them).

    >>> t = rat.to_tree("SELECT name FROM singer WHERE age > 20")
    >>> nodes = t.postorder()
    >>> row = {"node_names": [n.label for n in nodes], "node_arity": [len(n.children) for n in nodes]}
    >>> tree_of(row) == t, rat.serialize(tree_of(row)) == rat.serialize(t)
    (True, True)
    """
    names, arity = row.get("node_names"), row.get("node_arity")
    if not names or not arity or len(names) != len(arity):
        return None
    stack: list[rat.Node] = []
    for name, k in zip(names, arity):
        if k > len(stack):
            return None
        children = stack[len(stack) - k:] if k else []
        del stack[len(stack) - k:]
        stack.append(rat.Node(name, children))
    return stack[0] if len(stack) == 1 else None
