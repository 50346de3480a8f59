"""Whole-query v2: the combiners, the protocols, the two tracks and leave-one-system-out."""

import json

import numpy as np
import pytest

from model.calibrators import (
    BoostedCombiner,
    MultivariatePlattScaler,
    TunedMPS,
    load_calibrator,
)
from model.metrics import auc
from model.wholequery.protocols import fit_test_splits
from model.wholequery.scf import FEATURE_NAMES as SCF_NAMES
from model.wholequery.tracks import track_features, track_methods


def test_protocols_hold_databases_and_systems_out():
    rng = np.random.default_rng(0)
    systems = np.repeat(["a", "b", "c"], 60)
    dbs = np.tile([f"db{i}" for i in rng.integers(0, 12, 60)], 3)
    fitted_on = {"one": {"a"}, "rest": {"a"}, "loso": {"b", "c"}, "pooled": {"a", "b", "c"}}
    for protocol, fit_systems in fitted_on.items():
        splits = list(fit_test_splits(systems, dbs, "a", protocol, n_folds=5))
        assert len(splits) == 5
        for fit, test in splits:
            assert set(systems[test]) == {"a"} and not (fit & test).any()
            assert not set(dbs[fit]) & set(dbs[test])  # schema-disjoint
            assert set(systems[fit]) == fit_systems
    tested = np.zeros(len(systems), dtype=bool)
    for _, test in fit_test_splits(systems, dbs, "a", "rest", n_folds=5):
        tested |= test
    assert tested.sum() == 60  # every row of the system is held out exactly once
    with pytest.raises(ValueError, match="protocol"):
        list(fit_test_splits(systems, dbs, "a", "fold"))


def test_tracks_never_mix_and_consensus_names_say_so():
    columns = ["log_prod", "geo", "node_root", "node_min", "exec_systems", "scf_systems_product",
               "nodec_root", "nodec_min", "exec_samples"]
    feats = track_features(columns)
    assert not {"exec_systems", "scf_systems_product", "nodec_min"} & set(feats["single-system"])
    assert set(feats["single-system"]) < set(feats["consensus"]) and "exec_samples" not in feats["consensus"]
    methods = track_methods(columns)
    assert all("consensus" not in m.name for m in methods["single-system"])
    assert all("consensus" in m.name for m in methods["consensus"])
    assert track_methods(["exec_systems"]).keys() == {"consensus"}


def test_tuned_mps_uses_unscaled_features_and_round_trips():
    """A feature a thousand times smaller than the other still gets its weight once standardised."""
    rng = np.random.default_rng(1)
    x = np.c_[rng.normal(size=2000) * 1e-3, rng.normal(size=2000)]
    y = (x[:, 0] * 1e3 + 0.3 * x[:, 1] + rng.normal(0, 0.5, 2000) > 0).astype(int)
    tuned = TunedMPS(["small", "big"]).fit(x, y)
    paper = MultivariatePlattScaler(["small", "big"]).fit(x, y)  # C=1 on raw features
    assert auc(tuned.confidence(x), y) > auc(paper.confidence(x), y) + 0.05
    again = load_calibrator(json.loads(json.dumps(tuned.to_dict())))
    np.testing.assert_allclose(again.confidence(x), tuned.confidence(x))


def test_boosted_combiner_learns_what_a_linear_map_cannot():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, size=(3000, 2))
    y = ((x[:, 0] * x[:, 1] > 0) ^ (rng.random(3000) < 0.1)).astype(int)  # XOR with 10% noise
    for method in ("sigmoid", "isotonic"):
        boosted = BoostedCombiner(["a", "b"], method).fit(x[:2000], y[:2000])
        p = boosted.confidence(x[2000:])
        assert auc(p, y[2000:]) > 0.8 and 0 <= p.min() and p.max() <= 1
    assert auc(TunedMPS(["a", "b"]).fit(x[:2000], y[:2000]).confidence(x[2000:]), y[2000:]) < 0.6
    with pytest.raises(NotImplementedError):
        boosted.to_dict()


def synthetic_base_scores(tmp_path):
    """A base-score table of 3 systems x 120 questions on 15 databases, informative columns, and
    node-scorer predictions for every row."""
    from test_wholequery import _node_rows

    from model.wholequery.base_scores import BaseScores

    rng = np.random.default_rng(3)
    n = 3 * 120
    label = (rng.random(n) < 0.7).astype(int)
    table = BaseScores(np.repeat(["s1", "s2", "s3"], 120), np.tile([f"dev_{i}" for i in range(120)], 3),
                       np.tile([f"db{i % 15}" for i in range(120)], 3), label,
                       {"exec_systems": np.clip(0.2 + 0.6 * label + rng.normal(0, 0.2, n), 0, 1),
                        **{f"scf_systems_{name}": np.clip(0.3 + 0.4 * label + rng.normal(0, 0.3, n), 0, 1)
                           for name in SCF_NAMES}})
    table.write_csv(tmp_path / "base.csv")
    nodes = tmp_path / "nodes.jsonl"
    nodes.write_text("".join(json.dumps(r) + "\n" for r in _node_rows(table, every=1)))
    return tmp_path / "base.csv", nodes


def test_cli_tracks_report_both_tracks_and_leave_one_system_out(tmp_path):
    from model.wholequery.__main__ import main

    base, nodes = synthetic_base_scores(tmp_path)
    out = tmp_path / "run"
    main(["--base-scores", str(base), "--node-predictions", str(nodes),
          "--node-predictions-consensus", str(nodes), "--out", str(out), "--folds", "3", "--tracks",
          "--no-progress"])
    text = (out / "tracks.md").read_text()
    assert "### single-system" in text and "### consensus" in text and "leave one system out" in text
    results = json.loads((out / "tracks.json").read_text())
    loso = results["consensus"]["consensus MPS tuned"]["leave one system out"]
    assert set(loso) == {"s1", "s2", "s3"} and all(m["auc"] > 0.7 for m in loso.values())


def test_evaluate_reaches_the_whole_query_tracks(tmp_path):
    """One evaluation stack: evaluate.py computes the same tracks from a base-score table."""
    from test_evaluate import make_cfg

    from model.evaluate import evaluate

    base, nodes = synthetic_base_scores(tmp_path)
    out = tmp_path / "eval"
    results = evaluate(make_cfg(**{"wholequery.base_scores": base, "wholequery.node_predictions": nodes,
                                   "wholequery.node_predictions_consensus": nodes, "out_dir": out,
                                   "n_folds": 3}))
    tracks = results["wholequery"]
    assert set(tracks) == {"single-system", "consensus"}
    assert all(set(runs) == {"fit on one", "fit on rest", "fit on rest, all systems", "leave one system out"}
               for runs in tracks["consensus"].values())
    saved = json.loads((out / "metrics.json").read_text())["wholequery"]
    assert saved["single-system"].keys() == tracks["single-system"].keys()
    assert "### consensus" in (out / "report.md").read_text()
