"""Choosing one query among several candidates for one question (a model's samples, several
systems' answers): ``Scorer.choose`` scores them and chooses by ``choose``.

Two rules: the candidate whose canonical tree (``rat``: aliases, join order, commutative operands
and equivalent spellings do not matter) the most candidates share, ties to the more confident
(the default); or the most confident candidate. On Spider dev, with the 11 systems' answers to
each question as candidates, out of fold, the first chose a right query for 88.6% of the
questions with the shipped model's command, where the best system alone was right for 86.0%
and the same model's most confident candidate for 78.3% (docs/scoring.md, "Choosing among
candidates").

>>> choose(["a", "b", "b"], [0.9, 0.6, 0.5])
1
>>> choose(["a", "b", "b"], [0.9, 0.6, 0.5], "most confident")
0
>>> choose(["a", "b"], [0.4, 0.6])  # one each: the more confident
1
"""

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CANDIDATES", "MAX_CANDIDATES", "RULES", "Choice", "check_rule", "choice_of", "choose", "groups_of"]

RULES = ("most common tree", "most confident")
# the candidates ``Scorer.choose`` scores at once (and rat-serve's /choose): a model that reads the
# other answers compares each candidate with every other, so the cost grows faster than their
# number (the shipped consensus model: 64 candidates 1 s, 256 about 10 s on one core)
MAX_CANDIDATES = 64
# the question_id the candidates share while they are scored: a model that reads the other
# answers to a question (the consensus track) reads them as answers to one question
CANDIDATES = "candidates"


def choose(trees: Sequence[Hashable], confidences: Sequence[float], rule: str = RULES[0]) -> int:
    """The index of the candidate ``rule`` chooses, given each candidate's tree (any key: equal
    keys, equal trees) and query confidence: ``most common tree`` (the tree most candidates
    share, ties to the one with the more confident candidate; its most confident candidate) or
    ``most confident``."""
    check_rule(rule)
    if not trees or len(trees) != len(confidences):
        raise ValueError(f"choose: {len(trees)} trees and {len(confidences)} confidences (at least one each)")
    candidates = range(len(trees))
    if rule == "most confident":
        return max(candidates, key=lambda i: confidences[i])
    votes: dict[Hashable, list[float]] = defaultdict(list)
    for tree, confidence in zip(trees, confidences):
        votes[tree].append(confidence)
    winner = max(votes, key=lambda t: (len(votes[t]), max(votes[t])))
    return max((i for i in candidates if trees[i] == winner), key=lambda i: confidences[i])


def check_rule(rule: str) -> None:
    """``rule`` is one of ``RULES``: else a ``ValueError`` naming it."""
    if rule not in RULES:
        raise ValueError(f"rule: unknown rule {rule!r} (known: {', '.join(map(repr, RULES))})"[:200])


@dataclass(frozen=True)
class Choice:
    """What ``Scorer.choose`` chose: ``index``, the chosen candidate's position; ``scored``, every
    candidate's ``ScoredQuery`` (or ``RowError``, left out of the choice), in order;
    ``agreeing``, how many candidates have the chosen one's tree (itself included)."""

    index: int
    scored: list[Any]
    agreeing: int

    @property
    def chosen(self) -> Any:
        """The chosen candidate's ``ScoredQuery``."""
        return self.scored[self.index]


def choice_of(scored: Sequence[Any], rule: str = RULES[0]) -> Choice | None:
    """The ``Choice`` by ``rule`` among scored candidates (each a ``ScoredQuery``, or the
    ``RowError`` of one that could not be scored), scored as answers to one question; None where
    none was scored. Candidates scored under the ``question_id`` ``CANDIDATES`` get theirs back
    (None)."""
    from model.nodes.outputs import tree_of

    readable = [i for i, s in enumerate(scored) if hasattr(s, "nodes")]  # (a RowError has none)
    if not readable:
        return None
    for i in readable:
        if scored[i].question_id == CANDIDATES:  # (the key that made them answers to one question)
            scored[i].question_id = None
    trees = [(scored[i].tree or tree_of({"node_names": [n.label for n in scored[i].nodes],
                                         "node_arity": [len(n.children) for n in scored[i].nodes]})).hash
             for i in readable]
    pick = choose(trees, [scored[i].query_confidence for i in readable], rule)
    return Choice(index=readable[pick], scored=list(scored), agreeing=trees.count(trees[pick]))


def groups_of(rows: Sequence[dict]) -> list[list[int]]:
    """The positions of the rows that answer one question, a group each, in order of first
    appearance: rows with one ``question_id``, or without one, the same ``db_id`` and question.

    >>> groups_of([{"question_id": 1}, {"question_id": "2"}, {"question_id": "1"},
    ...            {"db_id": "a", "question": "q"}, {"db_id": "a", "question": "q"}])
    [[0, 2], [1], [3, 4]]
    """
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        qid = row.get("question_id")
        key = ("id", str(qid)) if qid is not None else ("text", row.get("db_id"), row.get("question") or "")
        groups.setdefault(key, []).append(i)
    return list(groups.values())
