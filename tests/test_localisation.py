"""Error sites, the site reading and top-k localisation on hand-made trees."""

import pytest

from model.eval.localisation import (
    error_sites,
    localisation,
    localisation_markdown,
    localisation_of_scores,
    site_reading,
)

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
    assert (out["top1"], out["top3"]) == (0.0, 1.0)
    assert out["top1_site_reading"] == out["top1_site_scores"] == 1.0
    assert out["random_top1"] == pytest.approx(1 / 7)
    assert out["random_top3"] == pytest.approx(3 / 7)


def test_flat_scores_are_regrouped_by_row():
    import numpy as np

    rows = [{"node_labels": [1, 1, 1], "node_arity": [0, 0, 2]},
            {"node_labels": LABELS, "node_arity": ARITY}]
    conf = np.array([0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1])  # row 0 has no scores (left out)
    out = localisation_of_scores(rows, {"confidence": conf, "row": np.ones(7, dtype=int)})
    assert out["n_wrong_queries"] == 1 and out["top3"] == 1.0


def test_markdown_has_one_line_per_method_and_dashes_for_missing_readings():
    out = localisation([{"node_labels": LABELS, "node_arity": ARITY}], [[0.9, 0.9, 0.9, 0.2, 0.9, 0.3, 0.1]])
    lines = localisation_markdown({"scorer": out}).splitlines()
    assert len(lines) == 3 and lines[0].count("|") == lines[2].count("|") == 11
    assert lines[2].startswith("| scorer | 1 | 0.000 | 1.000 | 1.000 |") and "| – |" in lines[2]
