"""Node-model runs side by side on the same outputs: each run against a baseline run, paired.

Every run's ``predictions/test.jsonl`` is matched to the baseline run's rows for the same
(system, question) (outputs only one of them scored are left out, and counted), so a run that covers part of the data (``data.run_folds=[0]``, or
``data.holdout_system=<s>``: one system only) is compared with the baseline on exactly its
outputs. Printed per run: outputs, nodes, node AUC of the run and of the baseline on those nodes,
the difference with a 95% paired bootstrap interval (whole questions resampled), ECE, the
whole-query AUC of the least confident node, and node agreement with the other systems (the
consensus bar) on the same nodes, with the run's difference from it, where the baseline holds the
other systems' outputs; and the mean over the leave-one-system-out runs among them.

    python scripts/compare_node_runs.py --baseline runs/minilm_single runs/v2_f0_perturbed ...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model import metrics as M
from model.eval.baselines import node_agreement
from model.nodes.outputs import read_predictions, tree_of


def _fail(message: str) -> None:
    print(f"compare_node_runs.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _rows(run: Path) -> list[dict]:
    path = run / "predictions" / "test.jsonl"
    if not path.exists():
        _fail(f"{run}: no predictions/test.jsonl in it")
    skipped: Counter = Counter()
    rows = read_predictions(path, skipped)
    if not rows:
        _fail(f"{path}: no usable node predictions ({', '.join(f'{n} {why}' for why, n in skipped.items()) or 'empty'})")
    return rows


def _flat(rows: list[dict], field: str) -> np.ndarray:
    return np.concatenate([r[field] for r in rows]).astype(float)


def paired_auc_difference(a: np.ndarray, b: np.ndarray, labels: np.ndarray, groups: np.ndarray,
                          n: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """AUC(a) - AUC(b) on the same nodes, with a 95% bootstrap interval over whole groups.

    >>> y = np.array([0, 1, 0, 1]); g = np.array([0, 0, 1, 1])
    >>> paired_auc_difference(np.array([.1, .9, .2, .8]), np.array([.9, .1, .2, .8]), y, g, n=50)[0]
    0.75
    """
    draws = [M.auc(a[i], labels[i]) - M.auc(b[i], labels[i])
             for i in M.bootstrap_indices(len(labels), n, seed, groups)]
    low, high = M.percentile_interval(draws)
    return M.auc(a, labels) - M.auc(b, labels), low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path, required=True, help="a run covering every output of the others")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    args = parser.parse_args()

    base_rows = _rows(args.baseline)
    run_rows = {run: _rows(run) for run in args.runs}  # every file checked before the table starts
    base = {(r["system"], r["question_id"]): r for r in base_rows}
    trees = {key: tree_of(r) for key, r in base.items()}
    agreement = node_agreement({k: t for k, t in trees.items() if t is not None})
    print(f"baseline: {args.baseline} ({len(base_rows)} outputs)")
    print("| run | folds | systems | outputs | nodes | node AUC | baseline AUC | difference [95% CI] "
          "| ECE | query AUC | baseline query AUC | agreement AUC | run − agreement [95% CI] |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    held_out = []  # (run AUC, baseline AUC, agreement AUC) of leave-one-system-out runs
    for run in args.runs:
        rows = run_rows[run]
        left_out = sum((r["system"], r["question_id"]) not in base for r in rows)
        if left_out:  # e.g. another tokenizer skipped other over-long inputs
            print(f"{run}: {left_out} outputs not in the baseline, left out", file=sys.stderr)
        rows = [r for r in rows if (r["system"], r["question_id"]) in base]
        paired = [base[r["system"], r["question_id"]] for r in rows]
        labels = _flat(rows, "node_labels")
        if not np.array_equal(labels, _flat(paired, "node_labels")):
            _fail(f"{run}: node labels differ from the baseline's")
        conf, conf_base = _flat(rows, "node_confidences"), _flat(paired, "node_confidences")
        groups = np.concatenate([[r["question_id"]] * len(r["node_labels"]) for r in rows])
        diff, low, high = paired_auc_difference(conf, conf_base, labels, groups, args.n_bootstrap)
        correct = np.array([int(bool(r["execution_match"])) for r in rows])
        query = M.auc(np.array([min(r["node_confidences"]) for r in rows]), correct)
        query_base = M.auc(np.array([min(r["node_confidences"]) for r in paired]), correct)
        agreed = [agreement.get((r["system"], r["question_id"])) for r in rows]
        vs_agreement, agreement_auc = "– | –", float("nan")
        if all(a is not None for a in agreed):
            d, lo, hi = paired_auc_difference(conf, np.concatenate(agreed), labels, groups, args.n_bootstrap)
            agreement_auc = M.auc(np.concatenate(agreed), labels)
            vs_agreement = f"{agreement_auc:.3f} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        folds = ",".join(str(f) for f in sorted({r.get("fold") for r in rows} - {None})) or "-"
        systems = len({r["system"] for r in rows})
        print(f"| {run.name} | {folds} | {systems} | {len(rows)} | {labels.size} | {M.auc(conf, labels):.3f} "
              f"| {M.auc(conf_base, labels):.3f} | {diff:+.3f} [{low:+.3f}, {high:+.3f}] "
              f"| {M.ece(conf, labels):.3f} | {query:.3f} | {query_base:.3f} | {vs_agreement} |", flush=True)
        config = run / "config.json"
        if config.exists() and json.loads(config.read_text())["data"].get("holdout_system"):
            held_out.append((M.auc(conf, labels), M.auc(conf_base, labels), agreement_auc))
    if held_out:
        loso, seen, agreed_mean = np.mean(held_out, axis=0)
        alone = f"; node agreement alone {agreed_mean:.3f}" if np.isfinite(agreed_mean) else ""
        print(f"\nleave-one-system-out, mean over {len(held_out)} systems: node AUC {loso:.3f} held out, "
              f"{seen:.3f} when trained with the system's other outputs, difference {loso - seen:+.3f}{alone}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
