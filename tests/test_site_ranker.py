"""benchmarks/site_ranker.py's one-site variants: the wrong queries with one error site weigh more
(``one_site_x3``) or get a head of their own averaged with today's (``one_site_head``)."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from site_ranker import one_site_site_head

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
    weighted = one_site_site_head(separate=False)(table, range(200), x, sites, names, config)
    both = one_site_site_head(separate=True)(table, range(200), x, sites, names, config)
    assert not isinstance(weighted, list) and isinstance(both, list) and len(both) == 2
    assert gap(weighted) > gap(today) + 0.05
    assert gap(both[1]) > gap(both[0]) + 0.05  # the one-site head, against today's
    assert abs(gap(both) - (gap(both[0]) + gap(both[1])) / 2) < 1e-9


def test_default_command_is_single_system_only():
    done = subprocess.run([sys.executable, str(SCRIPT), "--default-command", "--groups", "single+consensus"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--default-command: the single-system track only" in done.stderr
    assert "Traceback" not in done.stderr
