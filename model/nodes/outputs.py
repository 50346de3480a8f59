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

import math
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


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_confidence(x) -> bool:
    """A finite number in [0, 1] (not a bool)."""
    return _is_number(x) and 0.0 <= x <= 1.0


# per-node lists a node row may carry: what each entry must be, and how a reason names it
_NODE_VALUES = {
    "node_confidences": (is_confidence, "numbers in [0, 1]"),
    "node_labels": (lambda x: isinstance(x, (bool, int, float)) and x in (0, 1), "0/1"),
    "node_arity": (lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0,
                   "non-negative integers"),
    "node_names": (lambda x: isinstance(x, str), "strings"),
    "node_types": (lambda x: isinstance(x, str), "strings"),
    # a model without a site head writes NaN site scores
    "site_scores": (lambda x: _is_number(x) or (isinstance(x, float) and math.isnan(x)), "numbers"),
}


def node_row_problem(row: dict) -> str | None:
    """Why a node-level row cannot be evaluated (None when it can), as far as its values go:
    ``question_id`` (and ``db_id``, ``system``, ``sql`` where given) not a string, a per-node
    list that is not a list of what it holds (confidences finite numbers in [0, 1], labels 0/1,
    arities non-negative integers, names and types strings, site scores finite numbers), no
    node at all, ``site_scores`` or an empty ``node_labels`` not one per node, a
    ``query_confidence`` not in [0, 1]. Missing fields and the other lists' lengths are
    ``check_rows``' own.

    >>> ok = {"question_id": "dev_1", "node_confidences": [0.5, 1], "node_labels": [1, 0]}
    >>> node_row_problem(ok) is None, node_row_problem({**ok, "site_scores": [float("nan")] * 2}) is None
    (True, True)
    >>> [node_row_problem({**ok, **bad}) for bad in ({"node_confidences": [0.5, float("nan")]},
    ...     {"node_labels": [1, "x"]}, {"node_arity": [0, -1]}, {"question_id": ["dev_1"]},
    ...     {"site_scores": [0.5]}, {"query_confidence": "abc"})]  # doctest: +NORMALIZE_WHITESPACE
    ['node_confidences not a list of numbers in [0, 1]', 'node_labels not a list of 0/1',
     'node_arity not a list of non-negative integers', 'question_id not a string',
     'site_scores length differs', 'query_confidence not a number in [0, 1]']
    """
    if "question_id" in row and not isinstance(row["question_id"], str):
        return "question_id not a string"
    for field in ("db_id", "system", "sql"):
        if row.get(field) is not None and not isinstance(row[field], str):
            return f"{field} not a string"
    for field, (ok, what) in _NODE_VALUES.items():
        values = row.get(field)
        if values is not None and (not isinstance(values, list) or not all(ok(x) for x in values)):
            return f"{field} not a list of {what}"
    confidences = row.get("node_confidences")
    if confidences is not None and not confidences:
        return "no nodes"
    for field in ("node_labels", "site_scores"):  # check_rows reads an empty list as absent
        if confidences and row.get(field) is not None and len(row[field]) != len(confidences):
            return f"{field} length differs"
    if row.get("query_confidence") is not None and not is_confidence(row["query_confidence"]):
        return "query_confidence not a number in [0, 1]"
    return None


def check_rows(rows: Sequence[dict], skipped: Counter | None = None) -> list[dict]:
    """The rows usable as node predictions; a row without ``question_id`` or node confidences,
    whose values are not what they should be (``node_row_problem``) or whose per-node lists
    disagree in length, is left out and counted in ``skipped`` by reason.

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
        elif (problem := node_row_problem(row)) is not None:
            reason = problem
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
