"""Neural node-model runs read beside the boosted scorer: several runs' mean logit, and a
site-label run read as a pointer.

``mean``: the rows the files share (same question, system and tree), with each node's
confidence the sigmoid of the files' mean logit; the output is a predictions file
``model.stack`` reads (docs/look_here_first.md: three MiniLM seeds' mean, node AUC 0.680).
Where every file has site scores (boosted runs), they are averaged too, so the output is an
ensemble of runs that ``site_misses.py`` reads as a pointer (three seeds of the default command).

``pointer``: a ``data.labels=sites`` run (each node's confidence that it is *not* an error
site) read as "look here first": its least confident node, scored against the error sites of
another run's node labels (``--labels``: e.g. the boosted default run's test.jsonl, whose labels
are the execution labels), over the wrong queries both files cover.

    python benchmarks/neural_logits.py mean <run>/predictions/test.jsonl <run2>/... --out mean.jsonl
    python benchmarks/neural_logits.py pointer <sites run>/predictions/test.jsonl --labels <run>/predictions/test.jsonl
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.eval.localisation import localisation
from model.nodes.outputs import read_predictions, write_predictions


def fail(message: str):
    print(f"neural_logits.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def keyed(path: Path) -> dict[tuple, dict]:
    """A predictions file's usable rows by (question, system); rows without node confidences are
    left out (``read_predictions``), a file with none or a line that is not JSON is one line."""
    if not path.is_file():
        fail(f"{path}: no such predictions file")
    try:
        rows = read_predictions(path)
    except ValueError as err:
        fail(str(err))
    if not rows:
        fail(f"{path}: no node predictions (question_id, node_confidences) in it")
    return {(r["question_id"], r.get("system")): r for r in rows}


def logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def mean_rows(files: list[dict[tuple, dict]]) -> list[dict]:
    """The rows every file has with the same tree, confidences the sigmoid of the mean logit,
    and the mean site score where every file has site scores.

    >>> a = {("q", "s"): {"question_id": "q", "node_names": ["x"], "node_confidences": [0.9]}}
    >>> b = {("q", "s"): {"question_id": "q", "node_names": ["x"], "node_confidences": [0.5]}}
    >>> round(mean_rows([a, b])[0]["node_confidences"][0], 4)  # logits 2.197 and 0
    0.75
    >>> a[("q", "s")]["site_scores"], b[("q", "s")]["site_scores"] = [0.2], [0.4]
    >>> mean_rows([a, b])[0]["site_scores"]
    [0.3]
    """
    out = []
    for key, row in files[0].items():
        rows = [f.get(key) for f in files]
        if any(r is None or r.get("node_names") != row.get("node_names") for r in rows):
            continue
        z = np.mean([logit(r["node_confidences"]) for r in rows], axis=0)
        mean = {**row, "node_confidences": [round(float(c), 6) for c in 1 / (1 + np.exp(-z))]}
        if all(r.get("site_scores") is not None for r in rows):
            mean["site_scores"] = [round(float(s), 6) for s in np.mean([r["site_scores"] for r in rows], axis=0)]
        else:
            mean.pop("site_scores", None)
        out.append(mean)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mean", help="several runs' mean node logit, as one predictions file")
    m.add_argument("files", nargs="+", type=Path)
    m.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("pointer", help="a site-label run's least confident node as the pointer")
    p.add_argument("file", type=Path)
    p.add_argument("--labels", type=Path, required=True, help="a predictions file with the node labels to score against")
    args = parser.parse_args(argv)
    if args.command == "mean":
        files = [keyed(f) for f in args.files]
        rows = mean_rows(files)
        write_predictions(args.out, rows)
        print(f"{len(rows)} rows in all {len(files)} files with the same tree -> {args.out}")
        return 0
    sites, labelled = keyed(args.file), keyed(args.labels)
    shared = [k for k, r in labelled.items() if k in sites and sites[k].get("node_names") == r.get("node_names")]
    rows = [labelled[k] for k in shared]
    if not all({"node_labels", "node_arity"} <= r.keys() for r in rows):
        fail(f"--labels {args.labels}: rows need node_labels and node_arity (a run's predictions/test.jsonl)")
    if not shared:
        fail(f"{args.file} and --labels {args.labels}: no prediction with the same tree in both")
    where = localisation(rows, [sites[k]["node_confidences"] for k in shared])
    print(f"{len(shared)} predictions in both files, {where['n_wrong_queries']} wrong queries with a site")
    print("  ".join(f"{k} {where[k]:.3f}" for k in ("top1_least_confident", "top3_least_confident",
                                                    "mrr_least_confident", "random_top1", "random_top3")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
