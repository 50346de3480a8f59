"""Whole-query methods: a named confidence (base-score columns -> calibrator) and their
evaluation per system with the papers' protocol (5 schema-disjoint folds, fit on one fold and
evaluate on the other four, mean +- std over folds) or a fixed calibration/test split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from model import metrics as M
from model.calibrators import (
    Calibrator,
    IsotonicCalibrator,
    MultivariatePlattScaler,
    PlattScaler,
    one_class,
)
from model.eval.report import markdown_table
from model.lm.token_probabilities import POOLINGS
from model.wholequery.base_scores import NODE_COLUMNS, BaseScores
from model.wholequery.protocols import fit_test_splits
from model.wholequery.scf import FEATURE_NAMES as SCF_NAMES


@dataclass(frozen=True)
class Method:
    """A named confidence: base-score columns -> calibrator (None = the raw score itself)."""

    name: str
    features: tuple[str, ...]
    make: Callable[[], Calibrator] | None = None
    # How to read a single raw feature: "prob" (a probability: PS on its logit), "log_prob" (PS
    # on the logit computed from the log), "fraction" (an agreement rate k/n with exact 0s and
    # 1s, whose logits would be +-27: PS on the raw value, Platt's original form).
    score_kind: str = "prob"

    @property
    def platt_kind(self) -> str:
        return {"prob": "prob", "log_prob": "log_prob", "fraction": "raw"}[self.score_kind]

    def raw(self, table: BaseScores) -> np.ndarray:
        x = table.columns[self.features[0]]
        return np.exp(x) if self.score_kind == "log_prob" else x


def sources(columns: Sequence[str]) -> list[str]:
    """The sources of additional outputs in a table's columns (`exec_<source>`): `systems`,
    `samples`, then any others (e.g. `lm_nucleus`) by name.

    >>> sources(["exec_lm_beam", "exec_samples", "log_prod", "exec_systems"])
    ['systems', 'samples', 'lm_beam']
    """
    found = [c[len("exec_"):] for c in columns if c.startswith("exec_")]
    return sorted(found, key=lambda s: ({"systems": 0, "samples": 1}.get(s, 2), s))


def default_methods(columns: Sequence[str]) -> list[Method]:
    """Raw scores (evaluated raw, after PS and after isotonic) and MPS combinations available."""
    methods = []
    if "log_prod" in columns:
        methods.append(Method("prod", ("log_prod",), score_kind="log_prob"))
        methods += [Method(n, (n,)) for n in POOLINGS[1:]]
    if "node_root" in columns:
        methods += [Method(n, (n,)) for n in NODE_COLUMNS]
        methods.append(Method("MPS(node root + min)", NODE_COLUMNS,
                              lambda: MultivariatePlattScaler(NODE_COLUMNS)))
    for src in sources(columns):
        methods.append(Method(f"exec_agreement_{src}", (f"exec_{src}",), score_kind="fraction"))
        if f"scf_{src}_product" in columns:
            methods.append(Method(f"scf_product_{src}", (f"scf_{src}_product",), score_kind="fraction"))
    scf = {src: tuple(f"scf_{src}_{n}" for n in SCF_NAMES) for src in sources(columns)
           if f"scf_{src}_product" in columns}
    for src, feats in scf.items():
        methods.append(Method(f"MPS(SCF {src})", feats, lambda f=feats: MultivariatePlattScaler(f)))
        ex = (*feats, f"exec_{src}")
        methods.append(Method(f"MPS(SCF {src} + exec)", ex, lambda f=ex: MultivariatePlattScaler(f)))
        if "node_root" in columns:
            nx = (*NODE_COLUMNS, *ex)
            methods.append(Method(f"MPS(node + SCF {src} + exec)", nx, lambda f=nx: MultivariatePlattScaler(f)))
    if "log_prod" in columns:
        lp = ("log_prod",)
        methods.append(Method("MPS(log_prod + geo + min + avg)", (*lp, *POOLINGS[1:]),
                              lambda: MultivariatePlattScaler(("log_prod", *POOLINGS[1:]))))
        for src, feats in scf.items():
            f1 = (*lp, *feats)
            methods.append(Method(f"MPS(log_prod + SCF {src})", f1, lambda f=f1: MultivariatePlattScaler(f)))
            f2 = (*f1, f"exec_{src}")
            methods.append(Method(f"MPS(log_prod + SCF {src} + exec)", f2,
                                  lambda f=f2: MultivariatePlattScaler(f)))
    return methods


METRICS = M.core_metric_fns(n_bins=10)


def _evaluate_once(method: Method, fit: BaseScores, test: BaseScores) -> dict[str, float]:
    """Metrics of one method fitted on `fit`, measured on `test` (fitted on labels of one class,
    a calibrated method says that class's rate)."""
    y = test.label
    out = {}
    rate = one_class(fit.label)
    if method.make is None:  # a raw score: raw, after PS (-P), after isotonic (-I)
        raw = method.raw(test)
        out.update({k: f(raw, y) for k, f in METRICS.items()})
        x_fit, x_test = fit.columns[method.features[0]], test.columns[method.features[0]]
        if rate is not None:
            ps = iso = np.full(len(y), float(rate))
        else:
            ps = PlattScaler(method.platt_kind).fit(x_fit, fit.label).confidence(x_test)
            iso = IsotonicCalibrator().fit(x_fit, fit.label).confidence(x_test)
        out.update({"brier_platt": M.brier(ps, y), "ece_platt": METRICS["ece"](ps, y),
                    "brier_isotonic": M.brier(iso, y), "ece_isotonic": METRICS["ece"](iso, y)})
    elif rate is not None:
        conf = np.full(len(y), float(rate))
        out.update({k: f(conf, y) for k, f in METRICS.items()})
        out.update({"brier_platt": out["brier"], "ece_platt": out["ece"]})
    else:
        cal = method.make().fit(score_matrix(fit, method.features), fit.label)
        conf = cal.confidence(score_matrix(test, method.features))
        out.update({k: f(conf, y) for k, f in METRICS.items()})
        out.update({"brier_platt": out["brier"], "ece_platt": out["ece"]})  # MPS is a Platt scaler
    return {k: float(v) for k, v in out.items()}


def score_matrix(table: BaseScores, features: Sequence[str]) -> np.ndarray:
    return np.stack([table.columns[f] for f in features], axis=1)  # (n, n_features)


def evaluate_methods(table: BaseScores, methods: Sequence[Method], protocol: str = "cv",
                     n_folds: int = 5, seed: int = 0, calibration_fraction: float = 0.2,
                     fit_on: str = "one") -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
    """`{system: {method: {metric: (mean, std)}}}` (std is 0 for the fixed split).

    `fit_on="one"` is the papers' CV (fit on one fold, test on the other four); `"rest"` is the
    usual k-fold (fit on four, test on one), which gives MPS five times more fitting data.

    Folds/splits are by database and identical across systems and methods, so every method of a
    system is measured on the same queries.
    """
    if protocol not in ("cv", "split"):
        raise ValueError(f"protocol must be 'cv' or 'split'; found {protocol!r}")
    name = "split" if protocol == "split" else fit_on
    results: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    for system in np.unique(table.system):
        splits = list(fit_test_splits(table.system, table.db_id, system, name, n_folds, seed,
                                      calibration_fraction))
        results[str(system)] = {}
        for method in methods:
            runs = [_evaluate_once(method, table.subset(f), table.subset(t)) for f, t in splits]
            results[str(system)][method.name] = {
                k: (float(np.nanmean([r[k] for r in runs])), float(np.nanstd([r[k] for r in runs])))
                for k in runs[0]}
    return results


def fit_calibrators(table: BaseScores, methods: Sequence[Method]) -> dict[str, dict[str, Calibrator]]:
    """Per system, each calibrated method fitted on all of that system's rows (to save and reuse).

    Raw-score methods give their Platt scaler (`<name>+PS`) and isotonic map (`<name>+isotonic`).
    A system whose queries are all right (or all wrong) gets none: no calibrator fits on one class.
    """
    fitted: dict[str, dict[str, Calibrator]] = {}
    for system in np.unique(table.system):
        t = table.subset(table.system == system)
        fitted[str(system)] = {}
        if one_class(t.label) is not None:
            continue
        for m in methods:
            if m.make is None:
                x = t.columns[m.features[0]]
                fitted[str(system)][f"{m.name}+PS"] = PlattScaler(m.platt_kind).fit(x, t.label)
                fitted[str(system)][f"{m.name}+isotonic"] = IsotonicCalibrator().fit(x, t.label)
            else:
                fitted[str(system)][m.name] = m.make().fit(score_matrix(t, m.features), t.label)
    return fitted


# ------------------------------------------------------------------------------------ tables

_COLUMNS = (("brier", "BS"), ("brier_platt", "BS-P"), ("auc", "AUC"), ("ece", "ECE"),
            ("ece_platt", "ECE-P"), ("brier_isotonic", "BS-I"), ("ece_isotonic", "ECE-I"))


def format_tables(results: Mapping, accuracy: Mapping[str, float] | None = None,
                  auc_methods: Sequence[str] | None = None) -> str:
    """Markdown: the mean over systems per method, then per-system AUC of chosen methods."""
    systems = list(results)
    methods = list(next(iter(results.values())))
    means = []
    for m in methods:
        cells = []
        for key, _ in _COLUMNS:
            vals = [results[s][m].get(key, (np.nan, 0))[0] for s in systems]
            cells.append("–" if np.all(np.isnan(vals)) else f"{np.nanmean(vals):.3f}")
        means.append([m, *cells])
    auc_methods = list(auc_methods or methods)
    per_system = []
    for s in systems:
        acc = [f"{accuracy[s]:.3f}"] if accuracy else []
        per_system.append([s, *acc, *(f"{results[s][m]['auc'][0]:.3f} ± {results[s][m]['auc'][1]:.3f}"
                                      for m in auc_methods)])
    mean_acc = [f"{np.mean(list(accuracy.values())):.3f}"] if accuracy else []
    per_system.append(["**mean**", *mean_acc, *(f"{np.mean([results[s][m]['auc'][0] for s in systems]):.3f}"
                                                for m in auc_methods)])
    return (markdown_table(["method", *(h for _, h in _COLUMNS)], means) + "\n\n"
            + markdown_table(["system", *(["acc"] if accuracy else []), *auc_methods], per_system))


def mps_weight_report(fitted: Mapping[str, Mapping[str, Calibrator]], method: str) -> str:
    """Markdown: MPS weights per feature (sub-clause), mean ± std over systems."""
    weights = [c.weights() for s in fitted.values() for n, c in s.items()
               if n == method and isinstance(c, MultivariatePlattScaler)]
    if not weights:
        return ""
    lines = [f"| feature | weight in {method} (mean ± std over systems) |", "|---|---:|"]
    for name in weights[0]:
        v = [w[name] for w in weights]
        lines.append(f"| {name} | {np.mean(v):+.3f} ± {np.std(v):.3f} |")
    return "\n".join(lines)
