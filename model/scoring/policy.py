"""``python -m model.scoring.policy``: choose a saved model's run / review / regenerate policy
(``model.scoring.verdict.choose_policy``) on its run's out-of-fold predictions, print it with the
shares it gives (and with each fold's thresholds chosen on the other folds), and with
``--write`` save it into the model's ``model.json`` (only its ``policy`` changes).

    python -m model.scoring.policy --model <run>/model --predictions <run>/predictions/test.jsonl \\
        --max-wrong 0.05 [--max-right-regenerated 0.25] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from model.errors import UsageError
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
    parser.add_argument("--max-wrong", type=float, default=MAX_WRONG)
    parser.add_argument("--max-right-regenerated", type=float, default=MAX_RIGHT_REGENERATED)
    parser.add_argument("--write", action="store_true", help="save the policy into the model's model.json")
    args = parser.parse_args(argv)
    from model.data.jsonl import iter_jsonl, write_json
    from model.errors import ModelFileError
    from model.scoring.scorer import PRETRAINED, Scorer

    try:
        scorer = Scorer.load(args.model)
        if scorer.saved is None:
            raise UsageError(f"--model {args.model}: a neural model has no whole-query calibrator to choose on")
        if not args.predictions.is_file():
            raise UsageError(f"--predictions {args.predictions}: no such file")
        try:
            rows = list(iter_jsonl(args.predictions))
        except (ValueError, UnicodeDecodeError) as e:
            raise UsageError(f"--predictions {args.predictions}: not JSON lines ({type(e).__name__})") from None
        confidence, labels, name, folds = prediction_pairs(scorer.saved, rows)
        targets = {"max_wrong": args.max_wrong, "max_right_regenerated": args.max_right_regenerated}
        policy = choose_policy(confidence, labels, label=name, **targets)
        check = held_out(confidence, labels, folds, **targets) if len(np.unique(folds)) > 1 else None
    except (UsageError, ModelFileError) as e:
        print(f"policy: error: {e}", file=sys.stderr)
        return 2
    print(f"policy: {policy.target}")
    print(f"  run at query confidence >= {policy.run_at}; regenerate below {policy.regenerate_below}")
    print("  out of fold: " + ", ".join(f"{k} {v}" for k, v in policy.measured.items()))
    if check is not None:
        print("  thresholds chosen on the other folds: " + ", ".join(f"{k} {v}" for k, v in check.items()))
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


if __name__ == "__main__":
    sys.exit(main())
