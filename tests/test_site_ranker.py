"""benchmarks/site_ranker.py's one-site variants: the wrong queries with one error site weigh more
(``one_site_x3``) or get a head of their own averaged with today's (``one_site_head``); the
two-stage head (``autocontext``) reads the first stage's scores of each node's neighbours."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from site_ranker import (
    AutoContextHead,
    agreed_sites_site_head,
    autocontext_scores,
    autocontext_site_head,
    one_site_site_head,
    site_score_context,
)

from model.nodes import boosted

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "site_ranker.py"


def rows(seed: int = 0):
    """200 wrong queries of 4 nodes: in the first 100 the one site is the node whose feature is
    above 0.5; in the others two sites fall anywhere."""
    rng = np.random.default_rng(seed)
    x = rng.random((800, 1)) * 0.5
    sites = np.zeros(800, dtype=int)
    for q in range(100):
        i = 4 * q + rng.integers(4)
        x[i, 0], sites[i] = 0.5 + rng.random() * 0.5, 1
    for q in range(100, 200):
        sites[4 * q + rng.choice(4, 2, replace=False)] = 1
        x[4 * q:4 * q + 4, 0] = rng.random(4)
    table = SimpleNamespace(examples=[SimpleNamespace(node_labels=[0] * 4, node_arity=[0, 0, 0, 3])] * 200)
    return table, x, sites


def test_one_site_queries_weigh_more_or_get_their_own_head():
    table, x, sites = rows()
    config, names, probe = boosted.BoostedConfig(site_context=False), ("depth",), np.array([[0.9], [0.2]])

    def gap(model):
        p = boosted.site_probability(model, probe)
        return p[0] - p[1]

    today = boosted.fit_site_head(table, range(200), x, sites, names, config)
    weighted = one_site_site_head("weight")(table, range(200), x, sites, names, config)
    both = one_site_site_head("separate")(table, range(200), x, sites, names, config)
    alone = one_site_site_head("only")(table, range(200), x, sites, names, config)
    assert not isinstance(weighted, list) and isinstance(both, list) and len(both) == 2
    assert gap(weighted) > gap(today) + 0.05
    assert gap(both[1]) > gap(both[0]) + 0.05  # the one-site head, against today's
    assert abs(gap(both) - (gap(both[0]) + gap(both[1])) / 2) < 1e-9
    assert not isinstance(alone, list) and abs(gap(alone) - gap(both[1])) < 1e-9  # the one-site head itself


def test_two_stage_head_reads_its_first_stage_around_each_node():
    table, x, sites = rows()
    for i, e in enumerate(table.examples):  # inner folds group by database: ten of them
        table.examples[i] = SimpleNamespace(**vars(e), db_id=f"db{i % 10}")
    config, names = boosted.BoostedConfig(site_context=False), ("depth",)
    head = autocontext_site_head(table, range(200), x, sites, names, config)
    assert isinstance(head, AutoContextHead)
    arities = [e.node_arity for e in table.examples]
    scores = autocontext_scores(head, x, None, arities, False, names)
    assert scores.shape == (800,) and ((scores >= 0) & (scores <= 1)).all()
    first = head.first.predict_proba(x)[:, 1]
    assert not np.allclose(scores, first)  # the second stage is its own model
    # one-site queries: the node with the high feature is pointed at first
    pointed = scores[:400].reshape(100, 4).argmax(axis=1)
    assert (sites[:400].reshape(100, 4)[np.arange(100), pointed] == 1).mean() > 0.9
    # the root reads its children's highest first-stage score as its lowest "not a site" logit
    context = site_score_context(np.array([0.1, 0.8, 0.3, 0.05]), [[0, 0, 0, 3]])
    assert context[3, 2] == min(context[:3, 0]) and context[1, 0] < context[0, 0]


def test_default_command_is_single_system_only():
    done = subprocess.run([sys.executable, str(SCRIPT), "--default-command", "--groups", "single+consensus"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--default-command: the single-system track only" in done.stderr
    assert "Traceback" not in done.stderr


def test_sites_most_systems_share_weigh_less(capsys):
    """Three systems answer q1; a and b write the same wrong Project(t.x, t), c writes Project(t.y, t):
    a's site (t.x) is in b's tree (agreement 1/2), c's (t.y) in no other. q2 is train-side (one
    answer): weight 1."""
    arity, sites = [0, 0, 2], {"a": [1, 0, 0], "b": [1, 0, 0], "c": [1, 0, 0], "train": [0, 1, 0]}
    names = {"a": ["t.x", "t", "Project"], "b": ["t.x", "t", "Project"], "c": ["t.y", "t", "Project"],
             "train": ["t.z", "u", "Project"]}
    examples = [SimpleNamespace(question_id="q2" if s == "train" else "q1", system=s, node_names=names[s],
                                node_arity=arity, node_labels=[0, 1, 0], db_id="d") for s in names]
    table = SimpleNamespace(examples=examples)
    x = np.arange(12, dtype=float).reshape(12, 1)
    head = agreed_sites_site_head(table, range(4), x, np.concatenate(list(sites.values())), ("depth",),
                                  boosted.BoostedConfig(site_context=False))
    assert head is not None
    assert "agreed_sites: 2 of 4 wrong queries weighted 0.3" in capsys.readouterr().out  # a and b
