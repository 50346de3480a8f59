"""Evaluate confidences: calibration tables, reliability diagrams, abstention, an HTML view.

    python evaluate.py run_dir=<training run>        # node model: <run>/predictions/{val,test}.jsonl
    python evaluate.py predictions=<file>            # node JSONL, or confidence,label[,group] JSONL/CSV

Writes metrics.json, report.md, report.html (node-level input) and plots/ into ``out_dir``
(default ``<run_dir>/eval``) and prints the main table. ``evaluate(cfg)`` is the function tests
call; the Hydra wrapper only calls it.
"""

from model.extras import needs_extra

with needs_extra("train", "evaluate.py"):  # the core install: one line, exit 2
    import hydra
    from omegaconf import DictConfig

    from model.errors import user_errors
    from model.evaluate import evaluate


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    with user_errors("evaluate.py"):
        evaluate(cfg)


if __name__ == "__main__":
    main()
