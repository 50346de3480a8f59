"""Pseudo-systems: each demo dev question gets, per system, a right or a wrong output (and
samples), wrong ones drawn from perturbations of the gold query with a difficulty-dependent rate."""

from __future__ import annotations

import math
import random
from pathlib import Path

# Pseudo-systems: name -> mean error rate of one sampled output (before execution relabels
# perturbations that happen to return the gold result). Real Spider systems sit at 17-35% wrong.
DEMO_SYSTEMS = {"demo_strong": 0.20, "demo_medium": 0.30, "demo_weak": 0.36}
SAMPLES_PER_PREDICTION = 4
WRONG_POOL = 6  # distinct perturbations per dev question that the systems' mistakes come from

# ---------------------------------------------------------------------------------------------
# Predictions of pseudo-systems


def template_difficulty(template_name: str) -> float:
    """Logit offset: harder constructs get more errors, as in real systems."""
    hard = {"intersect": 1.2, "except_": 1.2, "not_in": 0.9, "in_subquery": 0.9, "bridge": 0.9,
            "above_average": 0.6, "union_categories": 0.8, "join_having": 0.7, "join_argmax": 0.7,
            "having_count": 0.6, "join_group_average": 0.4, "join_aggregate": 0.5}
    easy = {"count_all": -1.5, "list_labels": -1.2, "aggregate": -0.6, "count_filtered": -0.5,
            "distinct_values": -0.6, "min_max": -0.5}
    return hard.get(template_name, easy.get(template_name, 0.0))


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _draw(rng: random.Random, p_wrong: float, right: list[str], wrong: list[str],
          previous_wrong: str | None = None) -> str:
    """One output: right with probability 1 - p_wrong; a wrong one repeats the system's
    previous mistake half of the time."""
    if rng.random() >= p_wrong or not wrong:
        return rng.choice(right)
    if previous_wrong is not None and rng.random() < 0.5:
        return previous_wrong
    return rng.choice(wrong)


def make_predictions(questions: list[dict], schemas: dict[str, dict], db_paths: dict[str, Path],
                     difficulty: list[float], hand_written: dict[int, dict], seed: int = 0
                     ) -> dict[str, list[dict]]:
    """Predictions (with samples) of the pseudo-systems on `questions` (the dev split).

    Each system has a per-question error probability (system base rate + question difficulty);
    the prediction and each sample are wrong with that probability, and a wrong sample repeats
    the prediction's error half of the time, as sampled LLM outputs do.
    """
    import rat
    from model.synth.perturb import Perturber

    perturbers = {db_id: Perturber(rat.Schema.from_spider(entry), db_paths.get(db_id))
                  for db_id, entry in schemas.items()}
    golds, wrong_pools = [], []
    for index, q in enumerate(questions):
        perturber = perturbers[q["db_id"]]
        # Same printer as the perturbations, so style never gives an error away.
        golds.append(perturber.render(q["query"]))
        if index in hand_written:
            wrong_pools.append([perturber.render(s) for s in hand_written[index]["wrong"]])
        else:  # one pool per question: systems share typical mistakes, as real ones do
            made = perturber.perturb(q["query"], n=WRONG_POOL, seed=seed * 100_003 + index)
            wrong_pools.append([p.sql for p in made])
    out = {}
    for system, base_rate in DEMO_SYSTEMS.items():
        rng = random.Random(f"{system}:{seed}")
        rows = []
        for index, q in enumerate(questions):
            p_wrong = _sigmoid(_logit(base_rate) + difficulty[index] + rng.gauss(0, 0.5))
            right = [golds[index]]
            if index in hand_written:
                right += [perturbers[q["db_id"]].render(s) for s in hand_written[index]["right"]]

            sql = _draw(rng, p_wrong, right, wrong_pools[index])
            wrong = sql if sql not in right else None
            samples = [_draw(rng, p_wrong, right, wrong_pools[index], wrong)
                       for _ in range(SAMPLES_PER_PREDICTION)]
            rows.append({"question_id": f"dev_{index}", "db_id": q["db_id"], "sql": sql,
                         "samples": samples})
        out[system] = rows
    return out
