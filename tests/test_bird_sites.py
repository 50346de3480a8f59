"""benchmarks/bird_sites.py: the site head it fits learns from the extra (BIRD) rows beside its
fold's own, and bad input is one line."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bird_sites import head_with

from model.nodes import boosted

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bird_sites.py"


def test_the_head_learns_the_extra_rows():
    rng = np.random.default_rng(0)
    config = boosted.BoostedConfig(site_context=False)
    names = ("depth",)
    # the fold's own rows: 100 wrong queries of 3 nodes, the site anywhere whatever the feature says
    table = SimpleNamespace(examples=[SimpleNamespace(node_labels=[0, 0, 0], node_arity=[0, 0, 2])] * 100)
    x, sites = rng.random((300, 1)), (rng.random(300) < 0.33).astype(int)
    # the extra rows: a site exactly where the feature is above 0.5
    xb = rng.random((600, 1))
    extra = (xb, (xb[:, 0] > 0.5).astype(int), np.full(200, 3))
    probe = np.array([[0.9], [0.1]])
    without = boosted.fit_site_head(table, range(100), x, sites, names, config).predict_proba(probe)[:, 1]
    with_extra = head_with(extra, 1.0)(table, range(100), x, sites, names, config).predict_proba(probe)[:, 1]
    assert abs(without[0] - without[1]) < 0.3
    assert with_extra[0] - with_extra[1] > 0.5


def test_bad_weights_and_missing_data_are_one_line(tmp_path):
    for args, env, says in [(["--weights", "one", "--write", str(tmp_path)], {}, "--weights: not numbers: one"),
                            (["--weights", "1,-1", "--write", str(tmp_path)], {}, "--weights: a weight is below 0: 1,-1"),
                            (["--write", str(tmp_path)], {"RAT_SHARED_DATA": str(tmp_path)}, f"no BIRD data at {tmp_path / 'bird'}")]:
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                              env={**os.environ, **env})
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
