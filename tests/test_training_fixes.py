"""train.py's run folder: metrics.json says which val/* numbers are in-sample, a data key only the
neural models read is refused with model=features, and a wandb run's init arguments leave out a
setting wandb warns about."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from model.train import train

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
FAST = ["model=features", "logger=none", "model.hgb.max_iter=30"]


def compose_cfg(overrides: list[str], output_dir: Path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
    return cfg


def saved_metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def test_boosted_val_numbers_of_pairs_the_folds_fitted_on_are_marked_in_sample(tmp_path):
    """Each fold's node calibrator and site head are fitted on its validation pairs: val/* scored
    there were written beside the held-out test/* unmarked (a site head's top-1 of 1.0 on the
    demo). The counts are no scores; test/* are out of sample."""
    train(compose_cfg(FAST, tmp_path))
    saved = saved_metrics(tmp_path)
    marked = saved["in_sample"]["keys"]
    assert "node calibrator (model.calibration=platt)" in saved["in_sample"]["why"]
    assert "site head" in saved["in_sample"]["why"]
    assert {"val/auc", "val/brier", "val/ece", "val/query_auc", "val/localisation_top1",
            "val/localisation_top1_site_scores", "val/localisation_top1_site_reading",
            "val/localisation_mrr_least_confident"} <= set(marked)
    assert all(k.startswith("val/") and k in saved for k in marked)
    assert not {"val/nodes", "val/queries", "val/localisation_n_wrong_queries",
                "val/localisation_random_top1"} & set(marked)


def test_boosted_val_numbers_are_unmarked_where_nothing_was_fitted_on_them(tmp_path):
    """No node calibrator and no site head: the val pairs fitted nothing, so no mark; a site head
    alone marks only what is read from its scores (the site scores and the pointer)."""
    train(compose_cfg([*FAST, "model.calibration=none", "model.site_head=false"], tmp_path / "a"))
    saved = saved_metrics(tmp_path / "a")
    assert "val/auc" in saved and "in_sample" not in saved
    train(compose_cfg([*FAST, "model.calibration=none"], tmp_path / "b"))
    marked = saved_metrics(tmp_path / "b")["in_sample"]["keys"]
    assert set(marked) == {f"val/localisation_{k}{reading}" for k in ("top1", "top3", "mrr")
                           for reading in ("", "_site_scores")}


@pytest.mark.parametrize("value", ["isotonic", "beta"])
def test_fold_calibration_with_the_boosted_model_is_one_line_and_exit_2(tmp_path, value):
    """model=features calibrates its folds by model.calibration: data.fold_calibration, the
    neural models', was silently ignored (the run trained with platt, exit 0)."""
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "model=features", f"data.fold_calibration={value}",
                             "logger=none", f"hydra.run.dir={run}"], check=False, capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"train.py: error: data.fold_calibration={value}: model=features does not read it (the neural models' "
        "calibration of cross-fitted folds); its folds are calibrated by model.calibration (platt, isotonic or "
        "none; here platt)")
    assert not run.exists()


def test_fold_calibration_that_agrees_with_the_boosted_calibration_is_accepted(tmp_path):
    from model.train import check_fold_calibration

    for overrides in ([], ["model.calibration=isotonic"],
                      ["model.calibration=isotonic", "data.fold_calibration=isotonic"]):
        check_fold_calibration(compose_cfg(["model=features", *overrides], tmp_path))  # (no error)


def test_the_wandb_logger_leaves_out_the_anonymous_setting(tmp_path, monkeypatch):
    """Lightning's WandbLogger passes anonymous=None to wandb.init, which wandb (0.31 here) reads as
    set and warns of on every run: "wandb: WARNING The anonymous setting has no effect and will be
    removed in a future version." (wandb/wandb#10909)."""
    wandb = pytest.importorskip("wandb")
    from model.train import make_loggers

    calls = []
    monkeypatch.setattr(wandb, "init", lambda **kwargs: calls.append(kwargs) or object())
    monkeypatch.setattr(wandb, "run", None)
    (logger,) = make_loggers(compose_cfg(["logger=wandb"], tmp_path))
    logger.experiment  # noqa: B018 (starts the run: wandb.init)
    assert len(calls) == 1 and "anonymous" not in calls[0]
    assert calls[0]["project"] == "rat-confidence" and calls[0]["name"] == "train"


def test_neural_crossfit_val_numbers_are_marked_in_sample(tmp_path):
    """A cross-fitted neural run calibrates each fold on its validation pairs (data.fold_calibration)
    and measures val/* on those calibrated pairs; data.fold_calibration=none fits nothing there."""
    tiny = ["logger=none", "model.encoder.d_model=32", "model.encoder.n_layers=1", "model.encoder.n_heads=4",
            "model.encoder.max_positions=512", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
            "trainer.limit_val_batches=1", "~callbacks.progress_bar", "trainer.enable_progress_bar=false",
            "trainer.enable_model_summary=false", "data.protocol=crossfit", "data.folds=3"]
    train(compose_cfg(tiny, tmp_path))
    saved = saved_metrics(tmp_path)
    assert set(saved["in_sample"]["keys"]) == {"val/brier", "val/auc", "val/ece", "val/query_auc"}
    assert "each fold's calibrator (data.fold_calibration=platt)" in saved["in_sample"]["why"]
    assert "test/auc" in saved and "val/examples" in saved
