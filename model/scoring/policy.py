"""``python -m model.scoring.policy``: choose a saved model's run / review / regenerate policy
(``model.scoring.verdict.choose_policy``) on its run's out-of-fold predictions, print it with the
shares it gives (and with each fold's thresholds chosen on the other folds), and with
``--write`` save it into the model's ``model.json`` (only its ``policy`` changes). Where the run
also scored its folds without databases (``model.database=dropout``: the file
``test_without_database.jsonl`` beside ``--predictions``), the policy for queries scored without
their database is chosen on those, the same way.

    python -m model.scoring.policy --model <run>/model --predictions <run>/predictions/test.jsonl \\
        --max-wrong 0.05 [--max-right-regenerated 0.25] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from model.errors import UsageError, say_error
from model.nodes.policy import Policy
from model.scoring.verdict import (
    MAX_RIGHT_REGENERATED,
    MAX_WRONG,
    choose_policy,
    held_out,
    prediction_pairs,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.scoring.policy",
                                     description="choose a saved model's run / review / regenerate policy "
                                                 "on its run's out-of-fold predictions")
    parser.add_argument("--model", required=True, help="a saved model directory (model.json) or pretrained[:NAME]")
    parser.add_argument("--predictions", type=Path, required=True, help="<run>/predictions/test.jsonl")
    parser.add_argument("--without-database", type=Path,
                        help="the same predictions scored without databases (default: "
                             "test_without_database.jsonl beside --predictions, where it exists)")
    parser.add_argument("--max-wrong", type=float, default=MAX_WRONG)
    parser.add_argument("--max-right-regenerated", type=float, default=MAX_RIGHT_REGENERATED)
    parser.add_argument("--write", action="store_true", help="save the policy into the model's model.json")
    args = parser.parse_args(argv)
    from model.data.jsonl import write_json
    from model.errors import ModelFileError
    from model.scoring.scorer import PRETRAINED, Scorer

    try:
        scorer = Scorer.load(args.model)
        if scorer.saved is None:
            raise UsageError(f"--model {args.model}: a neural model has no whole-query calibrator to choose on")
        targets = {"max_wrong": args.max_wrong, "max_right_regenerated": args.max_right_regenerated}
        policy, check = chosen(scorer.saved, "--predictions", args.predictions, True, targets)
        blind = args.without_database
        if blind is None and (args.predictions.parent / "test_without_database.jsonl").is_file():
            blind = args.predictions.parent / "test_without_database.jsonl"
        blind_check = None
        if blind is not None:
            if scorer.saved.without_database_ is None:
                raise UsageError(f"--model {args.model}: has no calibrators for queries scored without a "
                                 "database (trained with model.database=with)")
            blind_policy, blind_check = chosen(scorer.saved, "--without-database", blind, False, targets)
            policy = replace(policy, without_database=blind_policy)
    except (UsageError, ModelFileError) as e:
        say_error("policy", e)
        return 2
    print(f"policy: {policy.target}")
    for heading, p, held in (("scored with their databases", policy, check),
                             ("scored without their databases", policy.without_database, blind_check)):
        if p is None:
            continue
        run_at, below = (f"{x:.4f}" if x is not None else "none" for x in (p.run_at, p.regenerate_below))
        print(f"  {heading}: run at query confidence >= {run_at}; regenerate below {below}")
        print("    out of fold: " + ", ".join(f"{k} {v}" for k, v in p.measured.items()))
        if held is not None:
            print("    thresholds chosen on the other folds: " + ", ".join(f"{k} {v}" for k, v in held.items()))
    if args.write:
        pretrained = args.model.partition(":")[2] or "spider" if args.model.startswith("pretrained") else None
        folder = PRETRAINED[pretrained] if pretrained else Path(args.model)
        folder = folder if (folder / "model.json").is_file() else folder / "model"
        path = folder / "model.json"
        meta = json.loads(path.read_text())
        meta["policy"] = policy.to_dict()
        write_json(path, meta)  # as the model was written: only the policy differs
        print(f"policy saved to {path}")
    return 0


def chosen(model, option: str, path: Path, database: bool, targets: dict) -> tuple[Policy, dict | None]:
    """The policy chosen on a predictions file's out-of-fold pairs, and each fold's shares under
    thresholds chosen on the other folds (None with one fold)."""
    from model.data.jsonl import iter_jsonl

    if not path.is_file():
        raise UsageError(f"{option} {path}: no such file")
    try:
        rows = list(iter_jsonl(path))
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{option} {path}: not JSON lines ({type(e).__name__})") from None
    confidence, labels, name, folds = prediction_pairs(model, rows, database)
    policy = choose_policy(confidence, labels, label=name, **targets)
    return policy, held_out(confidence, labels, folds, **targets) if len(np.unique(folds)) > 1 else None


if __name__ == "__main__":
    sys.exit(main())
