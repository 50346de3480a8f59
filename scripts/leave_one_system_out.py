"""Leave one system out on Spider dev, as a user with a new system meets the shipped model: for
each of the 11 systems, the shipped model's command trained without it
(``data.holdout_system``), then that system's file scored alone through ``rat-score`` with the
run's saved model, with and without databases, and compared with its labels (execution and
tree). Printed per system: execution accuracy, tree rate, mean whole-query confidence and its
gap, whole-query ECE and AUC, node AUC, before and after label shift (``model.label_shift``),
with the label-shift estimate and its interval. The same system's queries as the run scored
them out of fold (fold models fitted on neither the system nor those databases), through the saved
model's whole-query calibrators, are a second pair of tables: there no question of the system
was seen, where the saved model was fitted on the other systems' answers to the same questions.

    python scripts/leave_one_system_out.py --train --runs runs/loso_shipped      # trains what is missing
    python scripts/leave_one_system_out.py --runs runs/loso_shipped --out loso.json

Each file is scored whole; the questions of a database the benchmark copy lacks (Spider dev's
wta_1: 62 of 1,034) have no execution label and are left out of the numbers (label shift, off by
default in rat-score and turned on here, estimates its rate on the whole file).

``--calibrator-only RUN`` is the quick approximation: from one cross-fitted run of the shipped
command on all 11 systems (``RUN/predictions/test.jsonl``: every output scored out of fold by
database), each system's whole-query calibrator is fitted on the other 10 systems' out-of-fold
scores and applied to its own; the node model did see the system's outputs on other databases.
It prints the same table (with databases) and how far EM's rate is from each system's
execution accuracy.

``--train`` runs, for each system without a saved model under ``--runs``::

    python train.py model=features data=spider data.root=../shared/data/spider logger=none \\
        model.database=dropout data.holdout_system=<system> paths.output_dir=<runs>/<system>

(the shipped ``pretrained`` model's command, docs/model_card.md, plus the holdout; a few minutes
each on a quiet 2-core machine). The scored files are kept in each run (``scored_with.jsonl``,
``scored_without.jsonl``) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.data.datasets import database_path
from model.wholequery.new_system import labelled, report

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))
SYSTEMS = ("codes_1b", "codes_3b", "codes_7b", "codex_few_shot", "dail_sql_gpt4", "dail_sql_gpt4_sc",
           "din_sql_codex", "din_sql_gpt4", "gpt4_few_shot", "gpt4_zero_shot", "graphix_t5")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
       "TOKENIZERS_PARALLELISM": "false"}


def train_command(system: str, run: Path, root: Path) -> list[str]:
    return [sys.executable, "train.py", "model=features", "data=spider", f"data.root={root}", "logger=none",
            "model.database=dropout", f"data.holdout_system={system}", f"paths.output_dir={run}"]


def prediction_file(folder: Path, system: str) -> Path:
    return min(folder.glob(f"{system}.*"))  # there is one: main checked --systems


def scored(run: Path, system: str, root: Path, folder: Path, database: bool) -> Path:
    """The system's file scored alone by the run's saved model (rat-score; kept in the run)."""
    out = run / f"scored_{'with' if database else 'without'}.jsonl"
    if not out.is_file():
        command = [sys.executable, "-m", "model.scoring.cli", "--model", str(run / "model"), "--data-root",
                   str(root), "--split", "dev", "--predictions", str(prediction_file(folder, system)),
                   "--no-reasons", "--label-shift", "--out", str(out), *([] if database else ["--no-database"])]
        done = subprocess.run(command, capture_output=True, text=True, env=ENV, cwd=REPO, check=False)
        if done.returncode:
            raise SystemExit(f"leave_one_system_out.py: rat-score failed for {system}: {done.stderr[-400:]}")
        print("  " + "\n  ".join(line for line in done.stderr.splitlines() if line.startswith("rat-score")),
              flush=True)
    return out


def measure(run: Path, system: str, root: Path, folder: Path, n_bootstrap: int) -> dict:
    out = {}
    for database in (True, False):
        rows = [json.loads(line) for line in scored(run, system, root, folder, database).read_text().splitlines()]
        # the questions of a database missing from the benchmark (wta_1) have no execution label
        rows = [r for r in rows if database_path(root, r["db_id"]) is not None]
        s = labelled(rows, root, "dev", "execution")[system]
        if s.label != "execution":  # the questions of a missing database (wta_1): no execution label
            raise SystemExit(f"leave_one_system_out.py: {system}: rows without execution labels")
        out["with" if database else "without"] = report(s, n_bootstrap)
    return out


def out_of_fold(run: Path, system: str, n_bootstrap: int) -> dict:
    """The held-out system's queries as the run scored them out of fold (``predictions/test.jsonl``,
    ``test_without_database.jsonl``: fold models fitted on neither the system nor those databases
    nor their questions), through the saved model's whole-query calibrators (fitted on the other
    systems' out-of-fold scores): a new system on new databases. A run trained without database
    dropout wrote no ``test_without_database`` split and gets the first table only."""
    from model.calibrators import query_aggregates
    from model.nodes.estimator import BoostedNodeModel
    from model.wholequery.new_system import SystemScores

    model, out = BoostedNodeModel.load(run / "model"), {}
    for database, split in ((True, "test"), (False, "test_without_database")):
        path = run / "predictions" / f"{split}.jsonl"
        if not path.is_file():
            continue
        rows = [r for r in map(json.loads, path.read_text().splitlines())
                if r["system"] == system and r.get("execution_match") is not None]
        aggregates = np.array([query_aggregates(r["node_confidences"]) for r in rows])
        scores = SystemScores(system, model.query_calibrator_for(database).confidence(aggregates), None,
                              np.array([int(bool(r["execution_match"])) for r in rows]), None,
                              [np.array(r["node_confidences"]) for r in rows],
                              [np.array(r["node_labels"]) for r in rows])
        out["out of fold, with" if database else "out of fold, without"] = report(scores, n_bootstrap)
    return out


def trees_seen(run: Path) -> tuple[int, int]:
    """How many of the held-out system's queries (the run's ``test`` predictions) have the
    canonical tree of another system's query for the same question (its ``calibration``
    predictions: the other systems' outputs, which the final model was fitted on)."""
    def rows(split):
        return [json.loads(line) for line in (run / "predictions" / f"{split}.jsonl").read_text().splitlines()]

    others: dict[str, set[str]] = {}
    for r in rows("calibration"):
        others.setdefault(r["question_id"], set()).add(r["tree"])
    mine = rows("test")
    return sum(r["tree"] in others.get(r["question_id"], ()) for r in mine), len(mine)


def table(results: dict[str, dict], where: str) -> list[str]:
    def v(r, k):
        return r[k][0]

    lines = [f"\n{where} databases (execution labels; whole-query confidence as scored before / after label shift)",
             ("| system | queries | execution accuracy | tree rate | mean confidence | gap | ECE | "
             "whole-query AUC | node AUC | estimated rate [95%] | shifted mean confidence | gap | ECE |"),
             "|" + "---|" * 13]
    worst = {"|gap|": [], "ECE": [], "|gap| shifted": [], "ECE shifted": []}
    for system, both in results.items():
        r = both[where]
        ls = r.get("label_shift")  # (none out of fold: the run's rows are not shifted)
        before_mean = v(r, "unshifted_mean_confidence") if ls else v(r, "mean_confidence")
        before_gap = v(r, "unshifted_gap") if ls else v(r, "gap")  # mean confidence - accuracy
        before_ece = v(r, "unshifted_ece") if ls else v(r, "ece")
        worst["|gap|"].append(abs(before_gap))
        worst["ECE"].append(before_ece)
        shifted = "– | – | – | –"
        if ls:
            worst["|gap| shifted"].append(abs(v(r, "gap")))
            worst["ECE shifted"].append(v(r, "ece"))
            shifted = (f"{ls['rate']:.3f} [{ls['low']:.3f}, {ls['high']:.3f}] | {v(r, 'mean_confidence'):.3f} | "
                       f"{v(r, 'gap'):+.3f} | {v(r, 'ece'):.3f}")
        tree_rate = "–" if np.isnan(v(r, "tree_rate")) else f"{v(r, 'tree_rate'):.3f}"  # none out of fold
        lines.append(f"| {system} | {r['queries']} | {v(r, 'rate'):.3f} | {tree_rate} | "
                     f"{before_mean:.3f} | {before_gap:+.3f} | {before_ece:.3f} | {v(r, 'query_auc'):.3f} | "
                     f"{v(r, 'node_auc'):.3f} | {shifted} |")
    for k, values in worst.items():
        if values:
            lines.append(f"{k}: max {max(values):.3f}, mean {np.mean(values):.3f} over {len(values)} systems"
                         + (f"; within the target ({0.03 if 'gap' in k else 0.05}): "
                            f"{sum(x <= (0.03 if 'gap' in k else 0.05) for x in values)}"))
    return lines


def calibrator_only(run: Path, n_bootstrap: int, plot: Path | None = None) -> dict[str, dict]:
    """Each system's whole-query calibrator fitted on the other systems' out-of-fold scores of
    ``run`` (see the module's docstring); the report of ``model.wholequery.new_system`` per system,
    and with ``plot`` their reliability diagrams (unshifted) drawn to that PNG."""
    from model import label_shift as L
    from model.calibrators import QueryCalibrator, query_aggregates
    from model.wholequery.new_system import SystemScores, reliability

    path = run / "predictions" / "test.jsonl"
    rows = [r for r in map(json.loads, path.read_text().splitlines()) if r.get("execution_match") is not None]
    system = np.array([r["system"] for r in rows])
    aggregates = np.array([query_aggregates(r["node_confidences"]) for r in rows])
    y = np.array([int(bool(r["execution_match"])) for r in rows])
    out, diagrams = {}, {}
    for s in sorted(set(system)):
        mine, rest = system == s, system != s
        calibrator = QueryCalibrator.fit(aggregates[rest], y[rest])
        p = calibrator.confidence(aggregates[mine])
        source = float(y[rest].mean())
        shift = L.estimate(p, source, "execution")
        picked = [r for r, k in zip(rows, mine) if k]
        scores = SystemScores(s, shift.apply(p), p, y[mine], None,  # the run's node labels are execution's
                              [np.array(r["node_confidences"]) for r in picked],
                              [np.array(r["node_labels"]) for r in picked], shift.to_dict())
        out[s] = {"with": {**report(scores, n_bootstrap), "estimators": {"em": shift.rate, "source_oof": source}}}
        diagrams[s] = SystemScores(s, p, None, y[mine], None, [], [])
    if plot:
        reliability(diagrams, plot.with_suffix(""), "Spider dev, each system held out of the whole-query "
                    "calibrator (execution labels, with databases)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("runs/loso_shipped"), help="one run folder per system")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), help="default: Spider's 11")
    parser.add_argument("--data-root", type=Path, default=SHARED / "spider")
    parser.add_argument("--predictions", type=Path, default=SHARED / "predictions" / "spider_dev")
    parser.add_argument("--train", action="store_true", help="train the runs that are missing first")
    parser.add_argument("--n-bootstrap", type=int, default=200)
    parser.add_argument("--out", type=Path, help="write every number as JSON here")
    parser.add_argument("--calibrator-only", type=Path, metavar="RUN",
                        help="the quick approximation from one cross-fitted run on all systems (see above)")
    parser.add_argument("--plot", type=Path, help="with --calibrator-only: the reliability diagrams (PNG) here")
    args = parser.parse_args()
    if not (args.data_root / "dev.json").is_file():
        parser.error(f"--data-root {args.data_root}: no dev.json there (the shared data: set RAT_SHARED_DATA)")
    if args.calibrator_only and not (args.calibrator_only / "predictions" / "test.jsonl").is_file():
        parser.error(f"--calibrator-only {args.calibrator_only}: no predictions/test.jsonl")
    unknown = [s for s in args.systems if not any(args.predictions.glob(f"{s}.*"))]
    if unknown and not args.calibrator_only:
        parser.error(f"--systems: unknown system {unknown[0]!r} (no {unknown[0]}.* in --predictions "
                     f"{args.predictions})")
    results = calibrator_only(args.calibrator_only, args.n_bootstrap, args.plot) if args.calibrator_only else {}
    for system in () if args.calibrator_only else args.systems:
        run = args.runs / system
        if not (run / "model" / "model.json").is_file():
            if not args.train:
                print(f"{system}: no saved model in {run} (--train trains it); left out", flush=True)
                continue
            print(f"{system}: training {run}", flush=True)
            subprocess.run(train_command(system, run, args.data_root), env=ENV, cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
        print(f"{system}: scoring its file alone with {run / 'model'}", flush=True)
        results[system] = {**measure(run, system, args.data_root, args.predictions, args.n_bootstrap),
                           **out_of_fold(run, system, args.n_bootstrap)}
        seen, n = trees_seen(run)
        results[system]["trees_seen"] = [seen, n]
        print(f"  {seen} of {n} of its queries ({seen / max(n, 1):.1%}) have the tree of another system's "
              "query for the same question, which the run's model was fitted on", flush=True)
    if not results:
        parser.error(f"no run to measure under --runs {args.runs} (--train trains them)")
    places = ("with",) if args.calibrator_only else ("with", "without", "out of fold, with", "out of fold, without")
    for where in places:
        if all(where in r for r in results.values()):
            print("\n".join(table(results, where)))
    if args.calibrator_only:
        for where in places:
            errors = {}
            print(f"\nrate estimators, {where} databases: |estimate - execution accuracy|")
            for system, both in results.items():
                r = both[where]
                e = r.get("estimators") or {}
                line = {k: abs(v - r["rate"][0]) for k, v in e.items() if k != "source_oof"}
                for k, v in line.items():
                    errors.setdefault(k, []).append(v)
                print(f"  {system}: rate {r['rate'][0]:.3f}; " + ", ".join(f"{k} {e[k]:.3f} (error {v:.3f})"
                                                                         for k, v in line.items()))
            print("  mean error: " + ", ".join(f"{k} {np.mean(v):.3f} (max {max(v):.3f})" for k, v in errors.items()))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
