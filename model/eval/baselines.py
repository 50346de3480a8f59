"""Fine-grained baselines the node model is compared with (as in the fine-grained paper).

- Node agreement: a node's confidence is the fraction of the *other* systems' trees for the same
  question that contain it (``rat.label_nodes`` of this tree against each of theirs, so
  "contains" means exactly what node labels mean).
- Token level: the standardised predicted SQL, tokenised by the scorer LM, gets each token's
  probability under the LM (teacher forcing) as its confidence, and 0/1 labels from the
  Needleman-Wunsch alignment with the standardised gold SQL in the same tokens
  (``rat.align_tokens``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

import rat
from rat.labels import labels_against_others


def node_agreement(trees: Mapping[tuple[str, str], rat.Node]) -> dict[tuple[str, str], list[float]]:
    """For every ``(system, question_id) -> tree``, one confidence per node (post-order): the
    fraction of the other systems' trees for that question in which the node occurs.

    Questions answered by a single system get no entry (there is nothing to agree with).

    >>> t = {("a", "q"): rat.to_tree("SELECT x FROM t"), ("b", "q"): rat.to_tree("SELECT y FROM t"),
    ...      ("c", "q"): rat.to_tree("SELECT x FROM t")}
    >>> [n.label for n in t["a", "q"].postorder()], node_agreement(t)["a", "q"]
    (['t.x', 't', 'Project'], [0.5, 1.0, 0.5])
    """
    by_question: dict[str, dict[str, rat.Node]] = defaultdict(dict)
    for (system, qid), tree in trees.items():
        by_question[qid][system] = tree
    out = {}
    for qid, entries in by_question.items():
        if len(entries) < 2:
            continue
        for system, against in labels_against_others(entries).items():
            out[system, qid] = np.mean(list(against.values()), axis=0).tolist()
    return out


def standardise(sql: str, schema: rat.Schema | None = None) -> str:
    """The SQL both sides of the token alignment are written in: ``rat.canonicalize``, or the
    stripped original when it cannot be parsed."""
    try:
        return rat.canonicalize(sql, schema)
    except rat.RATError:
        return " ".join(sql.split())


def token_level_scores(model, tokenizer, items: Sequence[tuple[str, str, str]],
                       progress: bool = False, cache_path=None) -> list[tuple[list[float], list[int]]]:
    """For each ``(prompt, predicted_sql, gold_sql)`` (already standardised), the scorer LM's
    probability of each predicted SQL token and its 0/1 alignment label against the gold SQL.

    Tokens and probabilities are ``model.lm.token_probabilities.token_probabilities`` (the whole-query
    scorer's batched fast path), so they are the very ones its pooled scores are made of;
    with `cache_path` they are read from / appended to the scorer's disk cache.
    """
    from model.lm.token_probabilities import sql_token_ids, token_probabilities

    scored = token_probabilities(model, tokenizer, [(prompt, pred) for prompt, pred, _ in items],
                                 progress=progress, cache_path=cache_path)
    return [(probabilities, rat.align_tokens(token_ids, sql_token_ids(tokenizer, gold)))
            for (token_ids, probabilities), (_, _, gold) in zip(scored, items)]
