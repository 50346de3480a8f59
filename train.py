"""Train a node-level confidence model on the demo corpus or Spider; see ``model.train``.

    python train.py                                          # demo corpus, CPU, a few minutes
    python train.py +experiment=perturbed_posweight model=smollm2 data=spider data.root=../shared/data/spider
    python train.py trainer=ddp trainer.devices=2            # Lightning DDP (gloo on CPU)
    python train.py ckpt_path=<run>/checkpoints/last.ckpt hydra.run.dir=<run>   # resume, in its own run
"""

import os
import sys
from contextlib import contextmanager

from model.extras import needs_extra

with needs_extra("train", "train.py"):  # the core install: one line, exit 2
    import hydra
    from omegaconf import DictConfig

    from model.errors import UsageError, user_errors
    from model.train import train


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def cpu_threads(n: int | None):
    """At most ``n`` CPU threads for torch's operations and for the OpenMP and BLAS pools
    (scikit-learn's gradient-boosted trees, numpy) during the run: the pools already loaded are
    limited (threadpoolctl) and the libraries loaded later read the environment variables set
    here; ``None``: the libraries' default (one per core). More threads than free cores make both
    many times slower: each parallel step waits for a thread another process holds off the CPU."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"threads must be a whole number of 1 or more, or null; found {n!r}")
    from threadpoolctl import threadpool_limits

    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update({name: str(n) for name in THREAD_VARIABLES})
    torch = sys.modules.get("torch")  # imported later, torch reads OMP_NUM_THREADS
    before = torch.get_num_threads() if torch else None
    if torch:
        torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if torch:
            torch.set_num_threads(before)


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    with user_errors("train.py", run_dir=cfg.paths.output_dir), cpu_threads(cfg.get("threads")):
        metrics, _ = train(cfg)
    print(f"run directory: {cfg.paths.output_dir}  (next: {_python()} evaluate.py run_dir={cfg.paths.output_dir})")
    return metrics.get(cfg.get("optimized_metric", "val/loss"))


def _python() -> str:
    """This interpreter as the user would type it: `.venv/bin/python` in the checkout."""
    relative = os.path.relpath(sys.executable)
    return relative if not relative.startswith("..") else "python"


if __name__ == "__main__":
    main()
