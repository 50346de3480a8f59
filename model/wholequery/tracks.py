"""Two tracks, always apart, and what a user with a new system gets.

- *single-system*: only what one system's output gives: its token probabilities under the
  scorer LM (``log_prod``, ``geo``, ``min``, ``avg``), agreement with the scorer LM's own samples
  when drawn (``exec_lm_*``, ``scf_lm_*``; ``--lm-samples``) and the single-system node scorer's
  tree-level confidences (``node_root``, ``node_min``).
- *consensus*: the same plus other systems' outputs: sub-clause frequencies and execution
  agreement against the other systems (``scf_systems_*``, ``exec_systems``) and the consensus
  node scorer's tree-level confidences (``nodec_root``, ``nodec_min``).

Each track gets the same combiners: MPS as the SCF paper fits it (the reproduction row), a tuned
MPS (standardised, L2 strength by inner CV), and boosted trees followed by Platt or isotonic
calibration. ``pooled_out_of_fold`` measures a method per system under a protocol of
``model.wholequery.protocols`` (fit on one fold, on the rest, or on the other systems only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model import metrics as M
from model.calibrators import BoostedCombiner, MultivariatePlattScaler, TunedMPS, one_class
from model.wholequery.base_scores import BaseScores
from model.wholequery.methods import Method, score_matrix
from model.wholequery.protocols import fit_test_splits

TRACKS = ("single-system", "consensus")
SINGLE = ("log_prod", "geo", "min", "avg", "node_root", "node_min")
CONSENSUS_NODE = ("nodec_root", "nodec_min")


def track_features(columns: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The base-score columns each track may use, among those present.

    >>> track_features(["log_prod", "node_min", "exec_systems", "scf_systems_product", "exec_lm_beam"])
    {'single-system': ('log_prod', 'node_min', 'exec_lm_beam'), 'consensus': ('log_prod', 'node_min', 'exec_lm_beam', 'scf_systems_product', 'exec_systems')}
    """
    lm_samples = tuple(c for c in columns if c.startswith(("exec_lm_", "scf_lm_")))  # the scorer LM's own samples
    single = tuple(c for c in SINGLE if c in columns) + lm_samples
    scf = tuple(c for c in columns if c.startswith("scf_systems_"))
    extra = scf + tuple(c for c in ("exec_systems", *CONSENSUS_NODE) if c in columns)
    return {"single-system": single, "consensus": single + extra}


def track_methods(columns: Sequence[str]) -> dict[str, list[Method]]:
    """Per track: the strongest raw inputs, then the four combiners over all the track's columns.
    Consensus method names carry the word "consensus"."""
    out = {}
    for track, feats in track_features(columns).items():
        if not feats:  # e.g. no token scores and no node scorer: nothing single-system to combine
            continue
        tag = "" if track == "single-system" else "consensus "
        raw = [Method(f"{tag}raw {c}", (c,), score_kind="log_prob" if c == "log_prod" else
                      "fraction" if c == "exec_systems" else "prob")
               for c in ("log_prod", "node_min", "exec_systems", "nodec_min") if c in feats]
        out[track] = raw + [
            Method(f"{tag}MPS paper ({len(feats)} features)", feats, lambda f=feats: MultivariatePlattScaler(f)),
            Method(f"{tag}MPS tuned", feats, lambda f=feats: TunedMPS(f)),
            Method(f"{tag}HGB + Platt", feats, lambda f=feats: BoostedCombiner(f, "sigmoid")),
            Method(f"{tag}HGB + isotonic", feats, lambda f=feats: BoostedCombiner(f, "isotonic")),
        ]
    return out


def _confidence(method: Method, fit: BaseScores, test: BaseScores) -> np.ndarray:
    """The method's confidence on ``test`` after fitting on ``fit`` (raw inputs: Platt-scaled)."""
    from model.calibrators import PlattScaler

    if method.make is None:
        x = fit.columns[method.features[0]]
        return PlattScaler(method.platt_kind).fit(x, fit.label).confidence(test.columns[method.features[0]])
    return method.make().fit(score_matrix(fit, method.features), fit.label).confidence(score_matrix(test, method.features))


def pooled_out_of_fold(table: BaseScores, method: Method, protocol: str = "rest", n_folds: int = 5,
                       seed: int = 0, n_bins: int = 10) -> dict[str, dict[str, float]]:
    """Per system: AUC/Brier/ECE of its out-of-fold confidences pooled over the folds of a
    protocol (``model.wholequery.protocols``: ``one``, ``rest`` or ``loso``). Under ``one`` a
    row is predicted by four fits; its confidence is their mean."""
    out = {}
    for system in np.unique(table.system):
        own_index = np.flatnonzero(table.system == system)
        conf, count = np.zeros(len(own_index)), np.zeros(len(own_index))
        for fit_mask, test_mask in fit_test_splits(table.system, table.db_id, system, protocol, n_folds, seed):
            if not test_mask.any() or not fit_mask.any() or one_class(table.label[fit_mask]) is not None:
                continue
            positions = np.searchsorted(own_index, np.flatnonzero(test_mask))
            conf[positions] += _confidence(method, table.subset(fit_mask), table.subset(test_mask))
            count[positions] += 1
        seen = count > 0
        out[str(system)] = M.core_metrics(conf[seen] / count[seen], table.label[own_index][seen], n_bins)
    return out


def mean_over_systems(per_system: dict[str, dict[str, float]]) -> dict[str, float]:
    names = next(iter(per_system.values()))
    return {n: float(np.mean([m[n] for m in per_system.values()])) for n in names}


PROTOCOL_NAMES = {"fit on one": "one", "fit on rest": "rest", "fit on rest, all systems": "pooled",
                  "leave one system out": "loso"}


def track_results(table: BaseScores, n_folds: int = 5, seed: int = 0, n_bins: int = 10,
                  progress: bool = True) -> dict[str, dict[str, dict[str, dict[str, dict[str, float]]]]]:
    """``{track: {method: {protocol name: {system: {auc, brier, ece}}}}}`` for every method of
    both tracks under the protocols of ``PROTOCOL_NAMES``."""
    from tqdm.auto import tqdm

    results: dict = {}
    for track, methods in track_methods(list(table.columns)).items():
        results[track] = {}
        for method in tqdm(methods, desc=f"whole query, {track}", disable=not progress):
            results[track][method.name] = {name: pooled_out_of_fold(table, method, protocol, n_folds, seed, n_bins)
                                           for name, protocol in PROTOCOL_NAMES.items()}
    return results


def tracks_markdown(results: dict) -> str:
    """Per track: mean over systems (AUC / Brier / ECE) of every method under each protocol; then
    per system for the track's best method (by mean AUC, fit on the rest)."""
    from model.eval.report import markdown_table

    lines = []
    for track, methods in results.items():
        n_systems = len(next(iter(next(iter(methods.values())).values())))
        rows = []
        for name, runs in methods.items():
            means = {p: mean_over_systems(r) for p, r in runs.items()}
            rows.append([name, *(f"{m['auc']:.3f} / {m['brier']:.3f} / {m['ece']:.3f}" for m in means.values())])
        lines += [f"### {track} (mean over {n_systems} systems: AUC / Brier / ECE)", "",
                  markdown_table(["method", *PROTOCOL_NAMES], rows), ""]
        best = max(methods, key=lambda m: mean_over_systems(methods[m]["fit on rest"])["auc"])
        per_system = [[s, *(f"{methods[best][p][s][k]:.3f}" for p in ("fit on rest", "leave one system out")
                            for k in ("auc", "brier", "ece"))] for s in methods[best]["fit on rest"]]
        lines += [f"Per system, {best} (fit on the rest vs leave one system out):", "",
                  markdown_table(["system", "AUC", "Brier", "ECE", "LOSO AUC", "LOSO Brier", "LOSO ECE"],
                                 per_system), ""]
    return "\n".join(lines).rstrip()
