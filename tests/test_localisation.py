"""Error sites, the site reading and top-k localisation on hand-made trees."""

import pytest

from model.eval.localisation import (
    diff_marks,
    localisation,
    localisation_markdown,
    localisation_of_scores,
    span_overlaps,
)
from model.metrics import pointer_reliability
from rat.walks import error_sites, site_reading

# ((t.a)(((t.c)(10)Gt)(t)Selection)Project), gold has c = 10: Gt is the one site.
ARITY = [0, 0, 0, 2, 0, 2, 2]
LABELS = [1, 1, 1, 0, 1, 0, 0]


def test_error_site_is_the_lowest_wrong_node():
    assert error_sites(LABELS, ARITY) == [0, 0, 0, 1, 0, 0, 0]
    assert error_sites([1] * 7, ARITY) == [0] * 7
    # two independent wrong leaves are two sites; their wrong parents are not
    assert error_sites([0, 0, 0], [0, 0, 2]) == [1, 1, 0]


def test_site_reading_prefers_a_doubtful_node_over_confident_children():
    reading = site_reading([0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1], ARITY)
    assert max(range(7), key=reading.__getitem__) == 3  # Gt, not the less confident root
    assert reading[0] == pytest.approx(0.1)  # a leaf: 1 - p


def test_localisation_readings_and_random_rate():
    rows = [{"node_labels": LABELS, "node_arity": ARITY, "site_scores": [0, 0, 0, 1, 0, 0, 0]},
            {"node_labels": [1, 1, 1], "node_arity": [0, 0, 2]}]
    out = localisation(rows, [[0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1], [1, 1, 1]],
                       [r.get("site_scores") for r in rows])
    assert out["n_wrong_queries"] == 1
    assert (out["top1_least_confident"], out["top3_least_confident"]) == (0.0, 1.0)
    assert out["top1_site_reading"] == out["top1_site_scores"] == 1.0
    # the plain keys are the method's pointer: its site scores (else the site reading)
    assert out["pointer"] == "site scores" and out["top1"] == out["top1_site_scores"]
    assert out["random_top1"] == pytest.approx(1 / 7)
    assert out["random_top3"] == pytest.approx(3 / 7)


def test_flat_scores_are_regrouped_by_row():
    import numpy as np

    rows = [{"node_labels": [1, 1, 1], "node_arity": [0, 0, 2]},
            {"node_labels": LABELS, "node_arity": ARITY}]
    conf = np.array([0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1])  # row 0 has no scores (left out)
    out = localisation_of_scores(rows, {"confidence": conf, "row": np.ones(7, dtype=int)})
    assert out["n_wrong_queries"] == 1 and out["top3"] == 1.0


def test_mrr_is_the_reciprocal_rank_of_the_first_site():
    # least confident first: root (0.1), Selection (0.3), Gt (0.2)... order 6, 3, 5: the site is 2nd
    out = localisation([{"node_labels": LABELS, "node_arity": ARITY}], [[0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1]])
    assert out["mrr_least_confident"] == pytest.approx(0.5) and out["mrr_site_reading"] == out["mrr"] == 1.0


def test_markdown_has_one_line_per_method_and_reading():
    out = localisation([{"node_labels": LABELS, "node_arity": ARITY}], [[0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1]])
    lines = localisation_markdown({"scorer": out}).splitlines()
    assert len(lines) == 4 and lines[0].count("|") == lines[2].count("|") == 10
    assert lines[2].startswith("| scorer | least confident node | 1 | 0.000 | 1.000 | 0.500 | – |")
    assert lines[3].startswith("| scorer | site reading | 1 | 1.000 |")


def test_pointer_reliability_bins_wrong_queries_by_the_pointed_score():
    # two wrong queries: one pointed at its site (Gt) with a high score, one at a right leaf
    # with a low one; the right query is left out
    rows = [{"node_labels": LABELS, "node_arity": ARITY, "site_scores": [0, 0, 0, 0.9, 0, 0, 0]},
            {"node_labels": LABELS, "node_arity": ARITY, "site_scores": [0.3, 0, 0, 0.1, 0, 0, 0]},
            {"node_labels": [1, 1, 1], "node_arity": [0, 0, 2], "site_scores": [0.99, 0, 0]}]
    out = localisation(rows, [[0.5] * 7, [0.5] * 7, [1, 1, 1]], [r["site_scores"] for r in rows])
    assert out["pointer_reliability"] == [
        {"lo": 0.2, "hi": 0.4, "n": 1, "mean_score": 0.3, "top1": 0.0},
        {"lo": 0.8, "hi": 1.0, "n": 1, "mean_score": 0.9, "top1": 1.0}]
    assert "pointer_reliability" not in localisation(rows[:1], [[0.5] * 7])  # no site scores, no reading
    assert [b["n"] for b in pointer_reliability([0.0, 1.0, 0.2], [0, 1, 1])] == [1, 1, 1]  # edges binned
    table = localisation_markdown({"scorer": out}).split("How far to trust the pointer")[1]
    assert "| scorer | 0.8–1.0 | 1 | 0.900 | 1.000 |" in table


def test_diff_marks_point_at_what_differs_from_gold():
    pred = "select singer.name from singer where singer.age > 20"
    gold = "select singer.name from singer where singer.age > 30"
    assert [pred[a:b] for a, b in diff_marks(pred, gold)] == ["20"]
    assert diff_marks(gold, gold) == []
    # string literals are one token, compared case-sensitively (SQLite's = is)
    pred = "select a from t where b = 'France'"
    assert [pred[a:b] for a, b in diff_marks(pred, "select a from t where b = 'france'")] == ["'France'"]
    # an extra condition is marked, a missing one leaves an empty mark where it would go
    assert [pred[a:b] for a, b in diff_marks(pred, "select a from t")] == ["where b = 'France'"]
    assert diff_marks("select a from t", pred) == [(15, 15)]


def test_span_and_error_kind_readings():
    import rat

    pred, gold = "SELECT name FROM singer WHERE age > 20", "SELECT name FROM singer WHERE age < 20"
    spans = rat.sql_spans(pred)
    marks = diff_marks(spans.sql, rat.canonicalize(gold))
    tree = spans.tree.postorder()
    labels = rat.label_nodes(rat.to_tree(pred), rat.to_tree(gold))
    arity = [len(n.children) for n in tree]
    gt = [n.label for n in tree].index("Gt")
    assert error_sites(labels, arity)[gt] == 1
    row = {"node_labels": labels, "node_arity": arity, "node_spans": list(spans.spans),
           "diff_marks": marks, "error_kind": "operator"}
    pointing_at_gt = [0.9] * len(tree)
    pointing_at_gt[gt] = 0.1
    out = localisation([row], [pointing_at_gt])
    assert out["top1"] == out["span_overlap"] == 1.0 and out["n_span_queries"] == 1
    assert out["top1_by_error_kind"] == {"operator": {"n": 1, "top1": 1.0}}
    # pointing at the table leaf: neither a site nor over the diff
    pointing_at_table = [0.9] * len(tree)
    pointing_at_table[[n.label for n in tree].index("singer")] = 0.1
    out = localisation([row], [pointing_at_table])
    assert out["top1"] == out["span_overlap"] == 0.0
    assert span_overlaps(spans.spans[gt], marks) and not span_overlaps(None, marks)


def test_error_kind_columns_go_by_count_then_by_name():
    """The per-kind table's columns: most wrong queries first, a tie in name order (a set's
    order, which changes with the hash seed, decided ties)."""
    tied = ["value", "order", "limit", "join", "having", "group", "distinct", "column"]
    kinds = {"operator": {"n": 3, "top1": 1.0}, **{k: {"n": 1, "top1": 0.0} for k in tied}}
    # the counts add up over methods: "table" (1 + 1) comes before the kinds of one query
    results = {"a": {"top1_site_reading": 1.0, "top1_by_error_kind_site_reading": kinds},
               "b": {"top1_site_reading": 1.0, "top1_by_error_kind_site_reading": {
                   "table": {"n": 1, "top1": 1.0}}},
               "c": {"top1_site_reading": 1.0, "top1_by_error_kind_site_reading": {
                   "table": {"n": 1, "top1": 1.0}}}}
    table = localisation_markdown(results).split("Top-1 per error kind")[1].splitlines()
    header = [cell.strip() for cell in table[2].strip("|").split("|")]
    assert header == ["method", "operator", "table", *sorted(tied)]
