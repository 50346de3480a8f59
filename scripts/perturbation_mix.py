"""Error kinds in the 11 systems' wrong Spider dev predictions vs in our generated perturbations.

Real wrong predictions (execution mismatch or error against gold, by model.data.execution) and
wrong perturbations of the dev gold queries (one per question, drawn with DEFAULT_MIX) are both
classified by `model.synth.error_kinds.classify_error` (the most structural aspect in which the query
differs from gold), and the two distributions are printed side by side, plus, per generated kind,
how often execution still matches gold (those perturbations are labelled correct).

    python scripts/perturbation_mix.py [--data ../shared/data] [--workers 2] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import rat
from model.cli_types import existing_dir, positive_int
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.execution import default_cache_dir, execute_pairs
from model.data.predictions import load_predictions
from model.synth.error_kinds import ERROR_CLASSES, error_aspects
from model.synth.perturb import DEFAULT_MIX, KINDS, Perturber

WRONG = ("mismatch", "pred_error", "timeout")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=existing_dir, default=REPO.parent / "shared" / "data")
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--limit", type=positive_int, default=None, help="first N dev questions only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spider = args.data / "spider"
    if not (spider / "dev.json").exists():
        parser.error(f"--data {args.data}: no spider/dev.json there")
    cache = default_cache_dir()
    start = time.time()
    questions = load_questions(spider, "dev")[: args.limit]
    by_id = {q.question_id: q for q in questions}
    schemas = load_schemas(spider)
    db = {q.db_id: database_path(spider, q.db_id) for q in questions}

    # Real systems' wrong predictions.
    manifest = json.loads((args.data / "predictions" / "MANIFEST.json").read_text())["spider_dev"]
    predictions = []
    for entry in manifest:
        rows = load_predictions(args.data / entry["file"], load_questions(spider, "dev"),
                                entry["system"])
        predictions += [p for p in rows if p.question_id in by_id]
    outcomes = execute_pairs([(db[p.db_id], p.sql, by_id[p.question_id].gold_sql)
                              for p in predictions], cache_dir=cache, workers=args.workers,
                             progress=False)
    real, real_any, real_multi = Counter(), Counter(), 0
    for p, outcome in zip(predictions, outcomes, strict=True):
        if outcome in WRONG:
            aspects = error_aspects(by_id[p.question_id].gold_sql, p.sql, schemas.get(p.db_id))
            real[aspects[0]] += 1
            real_any.update(aspects)
            real_multi += len(aspects) > 1

    # Perturbations of the gold queries, one per question.
    perturbers: dict[str, Perturber] = {}
    made = []
    for index, q in enumerate(questions):
        if db[q.db_id] is None or q.db_id not in schemas:
            continue
        perturber = perturbers.setdefault(q.db_id, Perturber(schemas[q.db_id], db[q.db_id]))
        try:
            for p in perturber.perturb(q.gold_sql, n=1, seed=args.seed * 100_003 + index):
                made.append((q, p))
        except rat.RATError:
            continue
    p_outcomes = execute_pairs([(db[q.db_id], p.sql, q.gold_sql) for q, p in made],
                               cache_dir=cache, workers=args.workers, progress=False)
    generated, still_correct, classified, pert_any = Counter(), Counter(), Counter(), Counter()
    pert_multi = 0
    for (q, p), outcome in zip(made, p_outcomes, strict=True):
        generated[p.kind] += 1
        if outcome == "match":
            still_correct[p.kind] += 1
        elif outcome in WRONG:
            aspects = error_aspects(q.gold_sql, p.sql, schemas[q.db_id])
            classified[aspects[0]] += 1
            pert_any.update(aspects)
            pert_multi += len(aspects) > 1

    n_real, n_pert = sum(real.values()), sum(classified.values())
    print(f"real: {n_real} wrong predictions of {len(predictions)} ({len(manifest)} systems, "
          f"{len(questions)} dev questions); perturbations: {n_pert} wrong of {len(made)}")
    print("primary = the most structural aspect that differs; any = share of wrong queries "
          "differing in that aspect (several per query)")
    print(f"{'error kind':<18} {'real %':>7} {'perturbed %':>12} {'ratio':>6} {'real any %':>11} "
          f"{'pert any %':>11} {'drawn %':>8} {'mix %':>6} {'exec-correct %':>15}")
    for kind in ERROR_CLASSES:
        r = 100 * real[kind] / max(1, n_real)
        c = 100 * classified[kind] / max(1, n_pert)
        g = 100 * generated[kind] / max(1, len(made)) if kind in KINDS else float("nan")
        m = 100 * DEFAULT_MIX.get(kind, 0)
        ok = (100 * still_correct[kind] / generated[kind]) if generated[kind] else float("nan")
        ratio = c / r if r else float("nan")
        ra, pa = 100 * real_any[kind] / max(1, n_real), 100 * pert_any[kind] / max(1, n_pert)
        print(f"{kind:<18} {r:7.1f} {c:12.1f} {ratio:6.2f} {ra:11.1f} {pa:11.1f} {g:8.1f} {m:6.1f} "
              f"{ok:15.1f}")
    print(f"{'(multi-aspect)':<18} {100 * real_multi / max(1, n_real):7.1f} "
          f"{100 * pert_multi / max(1, n_pert):12.1f}")
    print(f"[{time.time() - start:.0f} s]")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
