"""``train.py model=features``: cross-fit the boosted node model on a data config's predictions
(``model.nodes.boosted.crossfit``), evaluate the out-of-fold scores, fit and save the final
model (``model.nodes.estimator.BoostedNodeModel``), and write the run directory.

    python train.py model=features                                   # demo corpus, seconds
    python train.py model=features data=spider data.root=../shared/data/spider data.protocol=crossfit
    python train.py model=features model.groups=single+consensus ... # consensus track

The run directory receives ``predictions/{val,test}.jsonl`` (``model.nodes.outputs`` rows with
``site_scores``, ``fold`` and ``method``), ``metrics.json``, ``config.yaml``/``config.json``,
``data.json`` (databases per fold) and ``model/`` (the saved final model).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from model import metrics as M
from model.data.jsonl import write_json
from model.eval.localisation import PER_READING, localisation
from model.nodes.boosted import check_roles, crossfit
from model.nodes.estimator import BoostedNodeModel, BoostedParams, OutOfFold, split_rows
from model.nodes.table import NodeTable, fold_roles, held_out, load_table
from model.scoring.verdict import training_policy

if TYPE_CHECKING:
    from omegaconf import DictConfig


def scores_summary(table: NodeTable, scored: dict[int, tuple], n_bins: int = 10) -> dict[str, float]:
    """Node AUC / Brier / ECE, whole-query AUC of the least confident node, localisation."""
    return summary_and_pointer(table, scored, n_bins)[0]


def summary_and_pointer(table: NodeTable, scored: dict[int, tuple],
                        n_bins: int = 10) -> tuple[dict[str, float], list[dict] | None]:
    """``scores_summary`` and, from the same localisation, how far to trust the pointer
    (``model.eval.localisation.pointer_reliability``: the wrong queries by the site score of the
    node pointed at, and how often it is an error site); None without site scores."""
    indices = sorted(scored)
    if not indices:
        return {}, None
    conf = np.concatenate([scored[k][0] for k in indices])
    labels = np.concatenate([table.examples[k].node_labels for k in indices]).astype(int)
    query_conf = np.array([scored[k][0].min() for k in indices])
    query_labels = np.array([int(table.examples[k].correct) for k in indices])
    rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity}
            for k in indices]
    sites = [scored[k][1] for k in indices]
    where = localisation(rows, [scored[k][0] for k in indices],
                         sites if all(s is not None for s in sites) else None)
    out = {**M.core_metrics(conf, labels, n_bins), "query_auc": M.auc(query_conf, query_labels),
           "nodes": float(len(conf)), "queries": float(len(indices))}
    out.update({f"localisation_{k}": float(v) for k, v in where.items() if isinstance(v, (int, float))})
    return out, where.get("pointer_reliability")


def params_of(model_cfg) -> BoostedParams:
    """The estimator's parameters from a ``model`` config (a ``DictConfig`` or a plain mapping):
    where the config's job ends."""
    from omegaconf import DictConfig, OmegaConf

    values = OmegaConf.to_container(model_cfg, resolve=True) if isinstance(model_cfg, DictConfig) else model_cfg
    return BoostedParams.from_mapping(values)


def train_boosted(cfg: DictConfig) -> tuple[dict[str, float], dict[str, Any]]:
    """Fit the boosted scorer on the data params's predictions; write the run directory."""
    from omegaconf import OmegaConf

    from model.nodes.outputs import prediction_row, write_predictions

    params = params_of(cfg.model)  # the config chooses the estimator's parameters, no more
    seed = int(cfg.get("seed", 0))
    output_dir = Path(cfg.paths.output_dir)
    check_train_split(cfg.data, params)
    table = load_table(cfg.data, params)
    roles, folds_info = fold_roles(table, cfg.data)
    n_folds = len(roles)
    fold_ids = []
    if folds_info["protocol"] == "crossfit":
        from model.data.folds import check_run_folds

        fold_ids = check_run_folds(cfg.data.get("run_folds"), len(roles))
    if fold_ids:  # data.run_folds: only these folds
        roles = [roles[f] for f in fold_ids]
        folds_info["folds"] = {str(f): folds_info["folds"][str(f)] for f in fold_ids}
    check_roles(table, roles, params, folds_info["protocol"], n_folds, fold_ids)  # (one line now, not
    # a traceback after fitting some folds)
    print(f"boosted node scorer ({params.method}, {len(table.names)} features, "
          f"protocol {folds_info['protocol']}, {len(roles)} fold(s))", flush=True)
    oof_raw: dict[int, np.ndarray] = {}
    test, val, fold_of = crossfit(table, roles, params, seed, fold_ids=fold_ids or None, raw=oof_raw)
    val_fold = {k: (fold_ids[i] if fold_ids else i) for i, role in enumerate(roles) for k in role["val"]}

    holdout = folds_info.get("holdout_system")  # reported: its outputs only (the others calibrate)
    summary, pointer = summary_and_pointer(table, held_out(table, test, holdout))
    metrics = {f"test/{k}": v for k, v in summary.items()}
    # how far to trust "look here first", out of fold: what Scorer says beside each pointer
    reliability = {"with_database": pointer}
    val_summary = scores_summary(table, val)
    metrics.update({f"val/{k}": v for k, v in val_summary.items()})
    without = None
    if params.database in ("dropout", "both") and params.test_database:
        # a model for both: the same folds scored (and calibrated) without databases too
        print("the same folds without databases:", flush=True)
        raw2: dict[int, np.ndarray] = {}
        test2, _, _ = crossfit(table, roles, replace(params, test_database=False), seed,
                               fold_ids=fold_ids or None, raw=raw2)
        summary2, reliability["without_database"] = summary_and_pointer(table, held_out(table, test2, holdout))
        metrics2 = {f"test/{k}": v for k, v in summary2.items()}
        metrics.update({f"test_without_database/{k[5:]}": v for k, v in metrics2.items()})
        without = OutOfFold(raw2, {k: conf for k, (conf, _) in test2.items()}, fold_of, metrics2)
    splits = [("test", held_out(table, test, holdout), fold_of), ("val", val, val_fold)]
    if holdout:  # the other systems' out-of-fold scores: what the saved model's calibrators read
        splits.append(("calibration", {k: v for k, v in test.items() if table.examples[k].system != holdout},
                       fold_of))
    if without is not None:  # the same folds scored without databases (a policy without databases reads them)
        splits.append(("test_without_database", held_out(table, test2, holdout), fold_of))
    for split, scored, folds in splits:
        rows = []
        for k in sorted(scored):
            conf, site = scored[k]
            extra = {"fold": folds[k], "method": params.method}
            if site is not None:
                extra["site_scores"] = [round(float(s), 6) for s in site]
            rows.append(prediction_row(table.examples[k], conf, split, **extra))
        write_predictions(output_dir / "predictions" / f"{split}.jsonl", rows)

    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved["data"]["root"] = str(table.root)  # evaluate.py finds the databases here
    write_json(output_dir / "config.json", resolved)
    (output_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    write_json(output_dir / "data.json", {**folds_info, "examples": len(table.examples),
                                           "features": list(table.names)})
    saved = None
    if params.save_model:  # the final model: fitted on every labelled prediction the run has
        out_of_fold = OutOfFold(oof_raw, {k: conf for k, (conf, _) in test.items()}, fold_of,
                                {k: v for k, v in metrics.items() if k.startswith("test/")}, without)
        saved = save_final_model(table, roles, params, out_of_fold, folds_info, seed, output_dir / "model",
                                 {k: v for k, v in reliability.items() if v})
        metrics.update({f"query/{k}": v for k, v in saved.query_metrics_.items()})
    write_json(output_dir / "metrics.json", {**metrics, **in_sample_val(val_summary, params)})
    print("  ".join(f"{k} {v:.3f}" for k, v in metrics.items()
                    if k.startswith(("test/", "query/", "test_without_database/"))))
    if warning := ranking_warning(metrics):
        print(warning, flush=True)
    return metrics, {"table": table, "roles": roles, "config": params, "model": saved}


def in_sample_val(summary: dict[str, float], params: BoostedParams) -> dict:
    """metrics.json's in-sample mark (``model.metrics.in_sample_note``) for the run's ``val/*``
    (``summary``: ``scores_summary`` of the validation pairs), which each fold fitted on: its node
    calibrator (``model.calibration`` but none) maps every confidence there, so every score of
    them is in-sample; its site head learns from them too (``BoostedNodeModel.fit(validation=...)``,
    except with ``model.database=both``), so the site scores' localisation and the pointer read
    from them. The counts (nodes, queries, wrong queries) and the random rates are no scores."""
    calibrated = params.calibration != "none"
    site_head = params.site_head and params.database != "both"
    site_scores = "localisation_top1_site_scores" in summary  # (the pointer then reads them)
    pointer = {f"localisation_{k}" for k in PER_READING}

    def fitted(key: str) -> bool:
        if key in ("nodes", "queries") or key.startswith(("localisation_n_", "localisation_random_")):
            return False  # counts, and rates of the labels alone
        if key.endswith("_site_scores") or (site_scores and key in pointer):
            return site_head  # (the site head reads the node model's raw probabilities, not the calibrated)
        return calibrated

    parts = [f"node calibrator (model.calibration={params.calibration})"] if calibrated else []
    if site_head and site_scores:
        parts.append("site head")
    return M.in_sample_note([f"val/{k}" for k in summary if fitted(k)], f"each fold's {' and '.join(parts)}")


def check_train_split(data_cfg, params: BoostedParams) -> None:
    """Where the run reads the train split (``data.train_split``: only for the train side, the
    outputs ``model.train_predictions`` names on its questions, ``data.llm_answers`` on
    ``data=spider``, and ``data.use_perturbations``' perturbations of its gold queries) and the
    dataset has none, the one line that says so also says what reads it and how to leave it out
    (your own data set has a dev split only); before the eval split's outputs are labelled."""
    from model.data.datasets import load_questions
    from model.errors import UsageError
    from model.nodes.examples import data_root

    split = data_cfg.get("train_split")
    perturbations = data_cfg.get("train_perturbations", 0) if data_cfg.get("use_perturbations") else 0
    if params.train_side == "none" or not split or not (params.train_predictions or perturbations):
        return
    try:
        load_questions(data_root(data_cfg.get("root")), split)
    except FileNotFoundError as error:
        readers, fixes = [], []
        if params.train_predictions:
            key = "data.llm_answers" if data_cfg.get("llm_answers") == params.train_predictions \
                else "model.train_predictions"
            named = params.train_predictions if isinstance(params.train_predictions, str) \
                else ", ".join(map(str, params.train_predictions))
            readers.append(f"{key} ({named}: outputs on its questions)")
            fixes.append(f"{key}=null")
        if perturbations:
            readers.append("data.use_perturbations (perturbations of its gold queries)")
            fixes.append("data.use_perturbations=false")
        raise UsageError(f"{error}: data.train_split={split} is read only for {' and '.join(readers)}; to learn "
                         f"from the eval split's outputs alone: {' '.join(fixes)}") from None


def ranking_warning(metrics: dict) -> str | None:
    """A line for a run whose whole-query confidence ranks its test queries worse than chance
    (a few outputs, or systems much alike): its saved calibrator would then run backwards.

    >>> ranking_warning({"test/query_auc": 0.38})[:60]
    'warning: on the test queries, the whole-query confidence ran'
    >>> ranking_warning({"test/query_auc": 0.9}) is None
    True
    """
    auc = metrics.get("test/query_auc")
    if auc is None or not auc < 0.5:
        return None
    return (f"warning: on the test queries, the whole-query confidence ranks right and wrong queries worse "
            f"than chance (AUC {auc:.3f}): more queries, or more varied ones, are needed before its "
            "confidences mean anything")


def save_final_model(table: NodeTable, roles: list[dict[str, list[int]]], params: BoostedParams,
                     out_of_fold: OutOfFold, folds_info: dict, seed: int, folder: Path,
                     reliability: dict | None = None) -> BoostedNodeModel:
    """Fit the final model on every example the run trains, validates or tests on (a held-out
    system stays out: ``data.holdout_system``), its calibrators on the run's ``out_of_fold``
    scores; score those examples with it (the in-sample numbers a reload must reproduce) and save
    it to ``folder``, with ``reliability`` (``summary_and_pointer``'s out of fold, with and
    without databases) when given."""
    holdout = folds_info.get("holdout_system")
    indices = sorted({k for role in roles for part in ("train", "val", "test") for k in role[part]
                      if table.examples[k].system != holdout})
    side = sorted({k for role in roles for k in role.get("side", [])})
    model = BoostedNodeModel(params, seed).fit(table, indices, side=side, out_of_fold=out_of_fold)
    conf, site = model.predict_proba(table, indices), model.site_scores(table, indices)
    scored = dict(zip(indices, zip(split_rows(conf, table, indices), split_rows(site, table, indices))))
    in_sample = scores_summary(table, scored)
    model.info_["metrics"].update({"in_sample": in_sample, "query_calibrator": model.query_metrics_})
    model.info_["trained_on"]["protocol"] = folds_info["protocol"]
    if reliability:
        model.info_["pointer_reliability"] = reliability
    oof = [k for k in indices if k in out_of_fold.confidences]
    blind = out_of_fold.without_database
    blind = ([blind.confidences[k] for k in oof] if blind is not None and all(k in blind.confidences for k in oof)
             else None)
    policy = training_policy(model, [table.examples[k] for k in oof], [out_of_fold.confidences[k] for k in oof],
                             without_database=blind)
    if policy is not None:  # run / review / regenerate thresholds on the out-of-fold curve
        model.info_["policy"] = policy.to_dict()
    model.save(folder)
    print(f"final model ({len(indices)} examples) saved to {folder}; in-sample node AUC "
          f"{in_sample.get('auc', float('nan')):.3f}", flush=True)
    return model
