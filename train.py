"""Train a node-level confidence model on the demo corpus or Spider; see ``model.train``.

    python train.py                                          # demo corpus, CPU, a few minutes
    python train.py +experiment=perturbed_posweight model=smollm2 data=spider data.root=../shared/data/spider
    python train.py trainer=ddp trainer.devices=2            # Lightning DDP (gloo on CPU)
    python train.py ckpt_path=<run>/checkpoints/last.ckpt    # resume
"""

from model.extras import needs_extra

with needs_extra("train", "train.py"):  # the core install: one line, exit 2
    import hydra
    from omegaconf import DictConfig

    from model.cli import user_errors
    from model.train import train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    with user_errors("train.py", run_dir=cfg.paths.output_dir):
        metrics, _ = train(cfg)
    print(f"run directory: {cfg.paths.output_dir}  (next: python evaluate.py run_dir={cfg.paths.output_dir})")
    return metrics.get(cfg.get("optimized_metric", "val/loss"))


if __name__ == "__main__":
    main()
