"""benchmarks/column_linker.py: the training pairs of the cross-encoder, the six node columns
read from its scores, and its one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from column_linker import NAMES, gold_columns, linker_columns, schema_columns, training_pairs

import rat

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "column_linker.py"


def schema() -> rat.Schema:
    return rat.Schema(tables={"singer": ("singer_id", "name", "age", "country"),
                              "concert": ("concert_id", "singer_id", "year", "venue", "city")},
                      column_types={"singer.age": "number"})


def test_pairs_hold_every_gold_column_and_hard_negatives():
    s = schema()
    gold = gold_columns(rat.to_tree("SELECT name FROM singer WHERE age > 30.5 AND country = 'a.b'", s), s)
    assert gold == {"singer.name", "singer.age", "singer.country"}  # not the literals with a dot
    pairs = training_pairs([("Names of singers older than 30?", s, gold)], negatives=4, seed=0)
    positives = [p for p in pairs if p[2] == 1.0]
    negatives = [p[1] for p in pairs if p[2] == 0.0]
    assert sorted(p[1].split(" (")[0] for p in positives) == ["singer . age", "singer . country", "singer . name"]
    assert len(negatives) == 4 and len(set(negatives)) == 4
    # half from the gold columns' tables (singer has one column left), the rest from anywhere
    assert [n.split(" (")[0] for n in negatives if n.startswith("singer .")] == ["singer . singer id"]
    assert len(schema_columns(s)) == 9


def test_node_columns_rank_against_the_whole_schema():
    s = schema()
    tree = rat.to_tree("SELECT name FROM singer WHERE age > 30", s)
    nodes = tree.postorder()
    names, arity = [n.label for n in nodes], [len(n.children) for n in nodes]
    scores = {c: float(i) for i, c in enumerate(schema_columns(s))}  # concert.city the likeliest (8)
    x = linker_columns(names, arity, scores)
    age = names.index("singer.age")
    assert x[age, NAMES.index("cl_logit")] == 2.0 and x[age, NAMES.index("cl_rank")] == 6
    assert x[age, NAMES.index("cl_gap")] == 6.0
    assert np.all(x[:, NAMES.index("cl_unused_best")] == 8.0)  # concert.city, not in the query
    root = len(names) - 1
    assert x[root, NAMES.index("cl_subtree_min")] == 1.0  # singer.name, the lowest column below
    assert np.isnan(linker_columns(names, arity, None)).all()


def test_bad_arguments_are_one_line(tmp_path):
    cache = tmp_path / "cache.json"
    cache.write_text("[1, 2")
    for args, message in ((["--variants", "today,nope"], "--variants: unknown ['nope']"),
                          (["--epochs", "0"], "--epochs and --negatives must be 1 or more"),
                          (["--cache", str(cache)], f"--cache {cache}: not a linker cache this script wrote")):
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                              env={**os.environ, "RAT_SHARED_DATA": str(tmp_path / "none")})  # read before any data
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
