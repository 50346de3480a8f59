"""Training a node scorer (what ``python train.py`` runs): seed -> instantiate -> fit -> test on the best checkpoint
-> write per-node predictions for ``evaluate.py``.

    python train.py                                          # demo corpus, CPU, a few minutes
    python train.py +experiment=perturbed_posweight model=smollm2 data=spider data.root=../shared/data/spider
    python train.py trainer=ddp trainer.devices=2            # Lightning DDP (gloo on CPU)
    python train.py ckpt_path=<run>/checkpoints/last.ckpt hydra.run.dir=<run>   # resume, in its own run
    python train.py model=minilm data=spider data.root=../shared/data/spider   # cross-fitting (Spider default)

With ``data.protocol=crossfit`` one model is trained per fold (``fold<i>/checkpoints``) and
``predictions/test.jsonl`` holds every example's out-of-fold prediction (``fold`` per row).

The run directory (``paths.output_dir``) receives ``checkpoints/``, ``predictions/{val,test}.jsonl``
(one line per example: ids, SQL, and per node its type, label and confidence), ``metrics.json``,
``data.json`` (split and counts), ``config.yaml`` (resolved) and the logger's files.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig, OmegaConf

from model.data.jsonl import read_json, write_json
from model.errors import UsageError
from model.nodes.outputs import prediction_row
from model.nodes.outputs import write_predictions as write_predictions_file

CONF = Path(__file__).resolve().parents[1] / "conf"  # train.py's config folder

if TYPE_CHECKING:  # imported where a neural model trains: model=features never loads Lightning
    import lightning as L

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(_var, _value)  # the LM comes from local files; never reach for the hub


def train(cfg: DictConfig) -> tuple[dict[str, float], dict[str, Any]]:
    """Run one experiment; returns (metrics, objects) so tests can inspect both."""
    check_data(cfg)
    quiet_logs()
    if cfg.model.get("scorer") == "boosted":  # model=features: gradient-boosted trees, no LM
        from model.train_boosted import train_boosted

        if cfg.get("ckpt_path") or not cfg.get("train", True):  # (both would be ignored: it trains anyway)
            given = f"ckpt_path={cfg.ckpt_path}" if cfg.get("ckpt_path") else "train=false"
            raise UsageError(f"{given}: model=features has no checkpoint; it fits and tests in one run "
                             "(its saved model, <run>/model, scores new outputs: rat-score --model <run>)")
        check_fold_calibration(cfg)

        return train_boosted(cfg)
    check_neural(cfg)
    # _convert_="all": plain dicts/lists in hparams, so checkpoints load with weights_only=True.
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data, _convert_="all")
    if cfg.data.get("protocol", "split") == "crossfit":
        return train_crossfit(cfg, datamodule)
    output_dir = Path(cfg.paths.output_dir)
    metrics, model, trainer, best = fit_and_test(cfg, datamodule, output_dir)
    if trainer.is_global_zero:
        datamodule.setup("test")
        if cfg.get("write_predictions", True):
            for split in ("val", "test"):
                write_predictions(model, datamodule, split, output_dir / "predictions" / f"{split}.jsonl")
        write_run_files(cfg, datamodule, output_dir, {"db_split": datamodule.db_split, "summary": datamodule.summary()},
                        {"best_checkpoint": best, **metrics, **partial_splits(trainer, datamodule, metrics)})
    return metrics, {"model": model, "datamodule": datamodule, "trainer": trainer, "best_checkpoint": best}


def fit_and_test(cfg: DictConfig, datamodule, run_dir: Path, test: bool | None = None):
    """One model: instantiate, fit (checkpoints under ``run_dir``), restore the best checkpoint,
    validate and (``test``) test it. Returns (metrics, model, trainer, best checkpoint path)."""
    import lightning as L
    import torch

    L.seed_everything(cfg.seed, workers=True)
    if torch.cuda.is_available():
        # cuDNN's attention backward (the default SDPA backend on H100/H200 since torch 2.11) gives
        # NaN gradients with a padding mask at some lengths (pytorch/pytorch#196678); with it on,
        # 2 of 5 folds of the Qwen node model went NaN after 5-6 epochs on an H200. The other
        # backends compute the same attention.
        torch.backends.cuda.enable_cudnn_sdp(False)
    model: L.LightningModule = hydra.utils.instantiate(cfg.model, _convert_="all")
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    for c in callbacks:  # each fold of cross-fitting keeps its own checkpoints
        if isinstance(c, L.pytorch.callbacks.ModelCheckpoint):  # (a real path, as Lightning's own: a run
            c.dirpath = os.path.realpath(run_dir / "checkpoints")  # resumed in its folder finds its best again)
    if not sys.stderr.isatty():  # a log file: one line per epoch instead of tqdm's redraws
        callbacks = [c for c in callbacks if not isinstance(c, L.pytorch.callbacks.TQDMProgressBar)]
        callbacks.append(epoch_lines())
    loggers = make_loggers(cfg)
    quiet = {} if sys.stderr.isatty() else {"enable_progress_bar": False}  # EpochLines instead
    # callbacks=none: no checkpoint either (Lightning would add its own ModelCheckpoint)
    checkpoints = any(isinstance(c, L.pytorch.callbacks.ModelCheckpoint) for c in callbacks)
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False,
                                                 default_root_dir=str(run_dir), enable_checkpointing=checkpoints,
                                                 **quiet)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    metrics: dict[str, float] = {}
    if cfg.get("train", True):
        if str(model.hparams.get("pos_weight")).lower() == "auto":
            datamodule.setup("fit")
            model.resolve_pos_weight(*datamodule.train_label_counts())
        trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        metrics.update(_floats(trainer.callback_metrics))
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if not cfg.get("train", True):  # the checkpoint tested (check_neural: train=false has one)
        best = str(cfg.ckpt_path)
    if cfg.get("test", True) if test is None else test:
        # Both restore the best checkpoint's weights into `model`, so predictions below use them
        # too; val/* and test/* then describe the same weights (not the last epoch's).
        for results in (trainer.validate(model, datamodule=datamodule, ckpt_path=best or None, verbose=False),
                        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)):
            metrics.update(_floats(results[0]) if results else {})
    elif best:
        model.load_state_dict(torch.load(best, map_location=model.device, weights_only=True)["state_dict"])
    # Lightning hands the model back on the CPU after fitting: predictions (prediction_rows) run
    # where it trained (on a GPU, a 116M-parameter encoder on the CPU took minutes per fold).
    model.to(trainer.strategy.root_device)
    return metrics, model, trainer, best


def partial_splits(trainer, datamodule, metrics: dict) -> dict:
    """metrics.json's word on val/* or test/* measured on fewer batches than the split has
    (``trainer.limit_val_batches``, ``trainer.limit_test_batches``), while the prediction files,
    which ``evaluate.py`` reads, hold every example: ``{"partial_splits": {split: "..."}}`` or {}."""
    partial = {}
    for split, limit in (("val", trainer.limit_val_batches), ("test", trainer.limit_test_batches)):
        # (from the limit as Lightning applies it: its num_val_batches is fit's, not validate()'s)
        total = len(getattr(datamodule, f"{split}_dataloader")())
        used = min(total, limit) if isinstance(limit, int) else int(total * limit)
        if any(k.startswith(f"{split}/") for k in metrics) and used < total:
            partial[split] = (f"{split}/* over {used} of {total} batches (trainer.limit_{split}_batches); "
                              f"predictions/{split}.jsonl holds every example")
    return {"partial_splits": partial} if partial else {}


def train_crossfit(cfg: DictConfig, datamodule) -> tuple[dict[str, float], dict[str, Any]]:
    """``data.protocol=crossfit``: one model per fold of the eval databases; every prediction is
    scored by the model whose training never saw its database (``predictions/test.jsonl``), and
    by the model it validated (``predictions/val.jsonl``)."""
    from model.metrics import in_sample_note

    output_dir = Path(cfg.paths.output_dir)
    method = "RAT node model (consensus)" if cfg.model.get("consensus") else "RAT node model (single-system)"
    rows: dict[str, list[dict]] = {"val": [], "test": []}
    folds, best = {}, {}
    datamodule.build_sources()
    for fold in datamodule.hparams.run_folds or range(int(cfg.data.folds)):
        datamodule.use_fold(fold)
        sizes = {s: len(datamodule.datasets[s]) for s in ("train", "val", "test")}
        print(f"fold {fold + 1}/{cfg.data.folds}: train {sizes['train']} distinct inputs, "
              f"val {sizes['val']}, test {sizes['test']} outputs", flush=True)
        _, model, _trainer, best[fold] = fit_and_test(cfg, datamodule, output_dir / f"fold{fold}", test=False)
        folds[fold] = sorted(db for db, s in datamodule.db_split.items() if s == "test")
        for split in ("val", "test"):
            rows[split] += prediction_rows(model, datamodule, split, fold=fold, method=method)
        part = _node_summary(rows["test"][-sizes["test"]:])
        print(f"fold {fold + 1}/{cfg.data.folds}: test node AUC {part['auc']:.3f}", flush=True)
    kind = cfg.data.get("fold_calibration", "platt")
    calibrate_folds(rows, kind)
    metrics = {f"{split}/{k}": v for split in ("val", "test") for k, v in _node_summary(rows[split]).items()}
    for split in ("val", "test"):
        write_predictions_file(output_dir / "predictions" / f"{split}.jsonl", rows[split])
    # every val/* score but the count: of confidences mapped by calibrators fitted on those rows
    fitted = [k for k in metrics if k.startswith("val/") and k != "val/examples"] if kind != "none" else []
    write_run_files(cfg, datamodule, output_dir, {"protocol": "crossfit", "folds": folds},
                    {"best_checkpoints": best, **metrics,
                     **in_sample_note(fitted, f"each fold's calibrator (data.fold_calibration={kind})")})
    print("  ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k.startswith("test/")), flush=True)
    return metrics, {"model": model, "datamodule": datamodule, "rows": rows, "best_checkpoints": best}


def merge_crossfit_runs(run_dirs: list[str | Path], out_dir: str | Path,
                        data_root: str | None = None) -> dict[str, float]:
    """One cross-fitted run from runs that each ran some folds (``data.run_folds=[i]``: folds
    trained side by side, or on different machines): their prediction files concatenated (each
    fold keeps the calibration its own run fitted), ``data.json`` with every fold's databases,
    ``config.json`` of the first run (its ``data.root`` replaced by ``data_root`` when given: the
    folds trained where the data was not), and the test node summary in ``metrics.json``
    (returned). Two runs holding the same fold are refused."""
    from model.nodes.outputs import read_predictions

    runs = [Path(r) for r in run_dirs]
    rows: dict[str, list[dict]] = {"val": [], "test": []}
    folds: dict[str, list] = {}
    for run in runs:
        info = read_json(run / "data.json")
        if info.get("protocol") != "crossfit":
            raise UsageError(f"{run}: not a cross-fitted run (data.json has no folds)")
        repeated = sorted(set(info["folds"]) & set(folds))
        if repeated:
            raise UsageError(f"{run}: fold(s) {repeated} are already in another run")
        folds.update(info["folds"])
        for split in rows:
            rows[split] += read_predictions(run / "predictions" / f"{split}.jsonl")
    out_dir = Path(out_dir)
    for split, split_rows in rows.items():
        write_predictions_file(out_dir / "predictions" / f"{split}.jsonl", split_rows)
    config = read_json(runs[0] / "config.json")
    config["data"]["run_folds"] = sorted(int(f) for f in folds)
    config["merged_from"] = [str(r) for r in runs]
    if data_root is not None:
        config["data"]["root"] = str(Path(data_root).resolve())
    write_json(out_dir / "config.json", config)
    (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    write_json(out_dir / "data.json", {"protocol": "crossfit", "folds": dict(sorted(folds.items()))})
    metrics = {f"{split}/{k}": v for split in rows for k, v in _node_summary(rows[split]).items()}
    write_json(out_dir / "metrics.json", metrics)
    return metrics


def calibrate_folds(rows: dict[str, list[dict]], kind: str = "platt") -> None:
    """crossfit: map each fold model's confidences through a calibrator (``kind``: platt |
    isotonic | none) fitted on the confidences it gave its validation databases, so that the
    folds' outputs share one scale before they are pooled; the raw values stay in
    ``node_confidences_raw``. Val rows are then in-sample (they fitted the map)."""
    import numpy as np

    from model.calibrators import fit_calibrator, one_class

    for r in (r for split in ("val", "test") for r in rows[split]):
        r.setdefault("node_confidences_raw", r["node_confidences"])
    for fold in sorted({r["fold"] for r in rows["val"]}):
        val = [r for r in rows["val"] if r["fold"] == fold]
        labels = np.concatenate([r["node_labels"] for r in val])
        if (label := one_class(labels)) is not None:  # (left as they are)
            logging.getLogger(__name__).warning("fold %s: its validation nodes are all %s: its confidences are "
                                                "not calibrated", fold, "right" if label else "wrong")
            calibrator = None
        else:
            calibrator = fit_calibrator(kind, np.concatenate([r["node_confidences_raw"] for r in val]), labels)
        for r in (r for split in ("val", "test") for r in rows[split] if r["fold"] == fold):
            raw = np.asarray(r["node_confidences_raw"], dtype=float)
            mapped = raw if calibrator is None else calibrator.confidence(raw)
            r["node_confidences"] = [round(float(c), 6) for c in mapped]


def calibrate_run(run_dir: str | Path, kind: str = "platt") -> dict[str, float]:
    """Apply ``calibrate_folds`` to a cross-fitted run's prediction files (from their raw values,
    so twice is the same as once), rewrite them and return the test node summary."""
    from model.nodes.outputs import read_predictions

    folder = Path(run_dir) / "predictions"
    rows = {split: read_predictions(folder / f"{split}.jsonl") for split in ("val", "test")}
    calibrate_folds(rows, kind)
    for split in ("val", "test"):
        write_predictions_file(folder / f"{split}.jsonl", rows[split])
    return _node_summary(rows["test"])


def _node_summary(rows: list[dict]) -> dict[str, float]:
    """Node AUC/Brier/ECE and the whole-query AUC of the least confident node, over rows."""
    import numpy as np

    from model import metrics as M

    conf = np.concatenate([r["node_confidences"] for r in rows])
    labels = np.concatenate([r["node_labels"] for r in rows])
    query = np.array([min(r["node_confidences"]) for r in rows])
    correct = np.array([int(bool(r["execution_match"])) for r in rows])
    return {**M.core_metrics(conf, labels), "query_auc": M.auc(query, correct), "examples": float(len(rows))}


def write_run_files(cfg: DictConfig, datamodule, output_dir: Path, data_info: dict, metrics: dict) -> None:
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved["data"]["root"] = str(datamodule.root)  # evaluate.py finds the databases here
    write_json(output_dir / "config.json", resolved)
    (output_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    write_json(output_dir / "data.json", data_info)
    write_json(output_dir / "metrics.json", metrics)


def prediction_rows(model, datamodule, split: str, **extra) -> list[dict]:
    """One row per example of ``split`` (see ``model.nodes.outputs``); identical inputs are
    scored once."""
    examples = datamodule.datasets[split]
    key = [(e.question_id, tuple(e.input_ids), tuple(e.node_agreement or ())) for e in examples]
    first: dict[tuple, int] = {}
    for i, k in enumerate(key):
        first.setdefault(k, i)
    unique = sorted(set(first.values()))
    loader = datamodule.loader_over([examples[i] for i in unique])
    order = [unique[int(i)] for batch in loader for i in batch["index"]]
    scored = dict(zip(order, model.node_confidences(loader)))
    return [prediction_row(e, scored[first[k]], split, **extra) for e, k in zip(examples, key)]


def write_predictions(model, datamodule, split: str, path: Path) -> int:
    """One JSON line per example of ``split`` (see ``model.nodes.outputs``)."""
    return write_predictions_file(path, prediction_rows(model, datamodule, split))


def quiet_logs() -> None:
    """Keep the project's own noise out of a user's log: deprecation warnings of our
    dependencies about their own internals and Lightning's advertisement."""
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
        lambda record: "litlogger" not in record.getMessage())
    # Lightning, imported once Hydra has set up logging, would print each message twice (its own
    # handler's line and Hydra's): they stay with its own handler, as when it is imported first
    logging.getLogger("lightning").propagate = False


def make_loggers(cfg: DictConfig) -> list:
    """The run's loggers (``cfg.logger``). Lightning's ``WandbLogger`` hands wandb.init
    ``anonymous=None``, a setting wandb no longer reads and warns of whenever it is given (0.31 here;
    wandb/wandb#10909): a warning in every clean run's output; it is left out where it is None
    (wandb's own default: unset)."""
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    for logger in loggers:
        init = getattr(logger, "_wandb_init", None)  # (WandbLogger's arguments for wandb.init)
        if isinstance(init, dict) and "anonymous" in init and init["anonymous"] is None:
            del init["anonymous"]
    return loggers


def epoch_lines():
    """A callback for progress where no terminal redraws a bar: one line per epoch with its losses."""
    import lightning as L

    class EpochLines(L.Callback):
        def on_train_epoch_end(self, trainer, module) -> None:  # after the epoch's validation
            if not trainer.is_global_zero:
                return
            values = {k: float(v) for k, v in trainer.callback_metrics.items() if k.endswith(("loss", "auc"))}
            shown = "  ".join(f"{k}={v:.4f}" for k, v in sorted(values.items()))
            print(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}: {shown}", flush=True)

    return EpochLines()


def check_data(cfg: DictConfig) -> None:
    """A data root that is missing or not a dataset folder, a run folder that cannot be written,
    a ``seed`` that is no whole number, a ``data`` key no data config has (``+data.typo=1``) or a
    protocol setting out of range (``check_split``) is the user's mistake: one line, before any work."""
    from model.data.datasets import own_databases
    from model.data.folds import check_split
    from model.errors import check_writable

    seed = cfg.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"seed must be a whole number; found {seed!r}")
    known = {key for path in (CONF / "data").glob("*.yaml") for key in OmegaConf.load(path)} - {"defaults"}
    unknown = sorted(set(cfg.get("data") or {}) - known)
    if unknown:
        raise UsageError(f"data: no key {unknown[0]!r} (the data keys: {', '.join(sorted(known))})")
    check_split(cfg.data)
    if cfg.get("paths", {}).get("output_dir"):
        check_writable(Path(cfg.paths.output_dir), "paths.output_dir", directory=True)
    if "root" not in cfg.data:
        return
    root = cfg.data.root
    unresolved = OmegaConf.to_container(cfg.data, resolve=False)
    needs_root = any("${data.root}" in str(v) for v in unresolved.values())  # e.g. data=spider
    if root is None and needs_root:
        raise UsageError("data.root is required for this dataset (e.g. data.root=../shared/data/spider)")
    if root is not None and not Path(root).is_dir():
        raise UsageError(f"data.root={root}: " + ("a file, not the dataset's folder" if Path(root).exists()
                                                  else "no such directory"))
    if root is not None and needs_root:  # before its prediction files, found from data.root (../predictions/...)
        folder, split = Path(root), cfg.data.get("eval_split") or "dev"
        missing = [name for name, found in (
            ("tables.json (or dev_tables.json)",  # (or your own databases, whose schemas are read from them)
             (folder / "tables.json").is_file() or any(folder.glob("*_tables.json")) or bool(own_databases(folder))),
            (f"{split}.json (data.eval_split)", (folder / f"{split}.json").is_file()
             or split == "train" and (folder / "train_spider.json").is_file())) if not found]
        if missing:
            raise UsageError(f"data.root={root}: no {' and no '.join(missing)} in it; give the dataset's own "
                             "folder (e.g. data.root=../shared/data/spider or ../shared/data/bird)")


def check_fold_calibration(cfg: DictConfig) -> None:
    """``data.fold_calibration`` is read by the neural models (``calibrate_folds``); the boosted
    model calibrates each fold on its validation databases with ``model.calibration``. A value
    other than its default and than ``model.calibration``, which model=features would silently
    ignore, is one line naming the key to set."""
    value, calibration = cfg.data.get("fold_calibration"), cfg.model.get("calibration")
    default = OmegaConf.load(CONF / "data" / "demo.yaml").get("fold_calibration")  # (every data config's)
    if value is None or value in (default, calibration):
        return
    raise UsageError(f"data.fold_calibration={value}: model=features does not read it (the neural models' "
                     "calibration of cross-fitted folds); its folds are calibrated by model.calibration (platt, "
                     f"isotonic or none; here {calibration})")


def check_neural(cfg: DictConfig) -> None:
    """The neural run's values that torch, Lightning or the model would refuse only later (once
    the data is built) or in a message of several lines: one line naming the key, before any work.
    ``ckpt_path`` with ``train=true`` resumes the run it belongs to, in its own folder: in another,
    Lightning forgets the earlier best checkpoint (its folder changed) and the run tests a worse one.
    ``train=false`` tests ``ckpt_path`` (none: nothing trained to test), which must be a checkpoint
    of the config's model (``check_checkpoint``) and, cross-fitted, is refused (a model per fold)."""
    def whole(key: str, value) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{key} must be a whole number of 1 or more; found {value!r}")

    def above_zero(value) -> bool:
        return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < float("inf")

    whole("trainer.max_epochs", OmegaConf.select(cfg, "trainer.max_epochs"))
    whole("data.batch_size", OmegaConf.select(cfg, "data.batch_size"))
    if not above_zero(cfg.model.get("lr")):
        raise UsageError(f"model.lr must be a number above 0; found {cfg.model.get('lr')!r}")
    pos_weight = cfg.model.get("pos_weight")
    if pos_weight is not None and str(pos_weight).lower() not in ("auto", "none") and not above_zero(pos_weight):
        raise UsageError(f"model.pos_weight must be auto, none or a number above 0; found {pos_weight!r}")
    encoder = cfg.model.get("encoder") or {}
    d_model, n_heads = encoder.get("d_model"), encoder.get("n_heads", 8)
    whole("model.encoder.d_model", d_model)
    whole("model.encoder.n_heads", n_heads)
    if d_model is not None and d_model % n_heads:
        raise UsageError(f"model.encoder.d_model={d_model} is not divisible by model.encoder.n_heads={n_heads}")
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator")).lower()
    if accelerator in ("gpu", "cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"trainer.accelerator={accelerator}: torch finds no GPU here (use trainer=cpu)")
    ckpt = cfg.get("ckpt_path")
    if not ckpt and not cfg.get("train", True):  # (it would test, and write the predictions of, an untrained model)
        raise UsageError("train=false needs ckpt_path=<run>/checkpoints/<file>.ckpt (the checkpoint to test)")
    if ckpt and not Path(ckpt).is_file():
        raise UsageError(f"ckpt_path={ckpt}: no such file")
    if ckpt and cfg.data.get("protocol", "split") == "crossfit":
        raise UsageError(f"ckpt_path={ckpt}: a cross-fitted run has a checkpoint per fold and cannot " + (
            "resume from one (run the folds left with data.run_folds=[...])" if cfg.get("train", True) else
            "test one (data.protocol=split tests a checkpoint; a cross-fitted run's own predictions: "
            "evaluate.py run_dir=<run>)"))
    if ckpt and cfg.get("train", True):
        folder = Path(ckpt).resolve().parent
        if folder != Path(cfg.paths.output_dir).resolve() / "checkpoints":
            raise UsageError(f"ckpt_path={ckpt}: resume in the run it belongs to (hydra.run.dir={folder.parent}): "
                             "in another folder the run forgets its best checkpoint so far")
    if ckpt:
        check_checkpoint(ckpt, cfg.model)


# What a checkpoint's weights were built for (their shapes, or what they read): a config that
# differs in one of these cannot load them (Lightning: a RuntimeError of ~150 state_dict keys)
# or would test them on other inputs.
CHECKPOINT_KEYS = ("embedder.name_or_path", "embedder.gguf_file", "embedder.fine_tune", "embedder.layer",
                   "encoder.d_model", "encoder.n_layers", "encoder.n_heads", "encoder.d_ff",
                   "encoder.max_positions", "encoder.head_tokens", "consensus")


def check_checkpoint(ckpt: str, model_cfg: DictConfig) -> None:
    """``ckpt_path`` is a checkpoint train.py wrote, of the model ``model_cfg`` builds: read with
    ``weights_only`` (tensors and plain values, never code), its saved hyperparameters compared
    with the config's (``CHECKPOINT_KEYS``). A file that is not one, or one of another model, is
    one line naming the model option (``model=minilm``) or the keys to add."""
    import pickle
    import zipfile

    import torch

    try:
        with warnings.catch_warnings():  # torch's own notes on a refused file: the one line below says it
            warnings.simplefilter("ignore")
            saved = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError,
            AttributeError, zipfile.BadZipFile) as e:
        raise UsageError(f"ckpt_path={ckpt}: not a checkpoint train.py wrote ({type(e).__name__}; only tensors "
                         "and plain values are loaded, never code)") from None
    hparams = saved.get("hyper_parameters") if isinstance(saved, dict) else None
    if not isinstance(hparams, dict) or not isinstance(saved.get("state_dict"), dict):
        raise UsageError(f"ckpt_path={ckpt}: not a checkpoint train.py wrote (no hyper_parameters and state_dict)")
    embedder = dict(hparams.get("embedder") or {})
    if "fine_tune" not in embedder:  # (an older run: known by its weights, as model.nodes.infer does)
        embedder["fine_tune"] = any(k.startswith("backbone.") for k in saved["state_dict"])
    trained = {**hparams, "embedder": embedder}
    config = OmegaConf.to_container(model_cfg, resolve=True)

    def value(values: dict, key: str):
        section, _, name = key.rpartition(".")
        part = (values.get(section) or {}) if section else values
        return bool(part.get(name)) if name == "fine_tune" else part.get(name)

    differ = [key for key in CHECKPOINT_KEYS if value(trained, key) != value(config, key)]
    if not differ:
        return
    if {"embedder.name_or_path", "embedder.gguf_file", "embedder.fine_tune"} & set(differ):
        name = _model_option([value(trained, f"embedder.{k}") for k in ("name_or_path", "gguf_file", "fine_tune")])
        if name:
            raise UsageError(f"ckpt_path={ckpt}: a model={name} checkpoint; add model={name}")

    def override(v) -> str:
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    raise UsageError(f"ckpt_path={ckpt}: trained with other model settings; add "
                     + " ".join(f"model.{k}={override(value(trained, k))}" for k in differ))


def _model_option(embedder: list) -> str | None:
    """The ``model=`` option (conf/model/) whose embedder is ``[name_or_path, gguf_file, fine_tune]``."""
    for path in sorted((CONF / "model").glob("*.yaml")):
        option = OmegaConf.load(path)
        if "scorer" not in option and "embedder" in option:
            e = option.embedder
            if [e.get("name_or_path"), e.get("gguf_file"), bool(e.get("fine_tune"))] == embedder:
                return path.stem
    return None


def _floats(values: dict) -> dict[str, float]:
    return {k: float(v) for k, v in values.items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m model.train merge --out <run> <fold run> [<fold run> ...]``: merge runs that each
    cross-fitted some folds (``data.run_folds=[i]``) into one run for ``evaluate.py``."""
    import argparse

    from model.errors import user_errors

    parser = argparse.ArgumentParser(prog="python -m model.train", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="merge cross-fitted runs of different folds")
    merge.add_argument("--out", required=True, help="the merged run directory")
    merge.add_argument("--data-root", default=None,
                       help="the data folder evaluate.py should read (default: the first run's data.root)")
    merge.add_argument("runs", nargs="+", help="run directories, each with some folds")
    args = parser.parse_args(argv)
    with user_errors(parser.prog):
        missing = [r for r in args.runs if not (Path(r) / "data.json").is_file()]
        if missing:
            raise UsageError(f"{missing[0]}: not a run directory (no data.json)")
        if args.data_root is not None and not Path(args.data_root).is_dir():
            raise UsageError(f"--data-root {args.data_root}: no such directory")
        try:
            metrics = merge_crossfit_runs(args.runs, args.out, args.data_root)
        except ValueError as err:  # a run's file that is not JSON: the message names it
            if isinstance(err, UsageError):
                raise
            raise UsageError(str(err)) from None
        print(f"{args.out}: " + "  ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k.startswith("test/")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
