"""benchmarks/neural_logits.py: several neural runs' mean logit, and a site-label run as a pointer."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import neural_logits

# one wrong query: a Project (node 2) over a right column (0) and a wrong Table (1, the site)
ROW = {"question_id": "q1", "system": "s", "node_names": ["name", "singer", "Project"],
       "node_arity": [0, 0, 2], "node_labels": [1, 0, 0]}


def write(path: Path, confidences: list[float], **extra) -> Path:
    path.write_text(json.dumps({**ROW, "node_confidences": confidences, **extra}) + "\n")
    return path


def test_pointer_reads_the_least_likely_not_site_against_other_labels(tmp_path, capsys):
    labels = write(tmp_path / "labels.jsonl", [0.9, 0.2, 0.3])
    # a site-label run's own labels differ (0 = a site); only --labels' count
    hit = write(tmp_path / "hit.jsonl", [0.9, 0.1, 0.8], node_labels=[1, 0, 1])
    miss = write(tmp_path / "miss.jsonl", [0.9, 0.8, 0.1], node_labels=[1, 0, 1])
    for path, top1 in ((hit, "1.000"), (miss, "0.000")):
        assert neural_logits.main(["pointer", str(path), "--labels", str(labels)]) == 0
        out = capsys.readouterr().out
        assert "1 wrong queries with a site" in out and f"top1_least_confident {top1}" in out


def test_mean_of_two_runs_and_a_missing_file(tmp_path, capsys):
    a, b = write(tmp_path / "a.jsonl", [0.9, 0.5, 0.5]), write(tmp_path / "b.jsonl", [0.1, 0.5, 0.5])
    out = tmp_path / "mean.jsonl"
    assert neural_logits.main(["mean", str(a), str(b), "--out", str(out)]) == 0
    row = json.loads(out.read_text())
    assert row["node_confidences"] == [0.5, 0.5, 0.5]  # logits +2.197 and -2.197
    with pytest.raises(SystemExit) as exit_:
        neural_logits.main(["mean", str(a), str(tmp_path / "no_such.jsonl"), "--out", str(out)])
    assert exit_.value.code == 2 and capsys.readouterr().err.strip().endswith("no_such.jsonl: no such predictions file")


def test_unusable_files_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    other = write(tmp_path / "other.jsonl", [0.9, 0.2, 0.3], question_id="q2")
    labels = write(tmp_path / "labels.jsonl", [0.9, 0.2, 0.3])
    for argv, message in ((["mean", str(bad), "--out", str(tmp_path / "m.jsonl")], "bad.jsonl:1: not a JSON line"),
                          (["pointer", str(other), "--labels", str(labels)], "no prediction with the same tree in both")):
        with pytest.raises(SystemExit) as exit_:
            neural_logits.main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err
