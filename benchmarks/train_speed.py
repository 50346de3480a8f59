"""Training throughput of the node model with the default config (conf/train.yaml) on the demo
corpus, side by side: embedder.layer=0 (a table lookup) vs running the whole LM every step.

    .venv/bin/python benchmarks/train_speed.py [--steps 12] [--lm-steps 3]

Prints examples/s and tokens/s (real tokens, padding excluded) of full optimisation steps
(forward, loss, backward, AdamW step) and the ratio between the two embedders.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
for var, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(var, value)


def default_objects(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["logger=none", *overrides])
    torch.manual_seed(cfg.seed)
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.setup("fit")
    model = instantiate(cfg.model, _convert_="all")
    model.pos_weight.fill_(1.0)
    return cfg, datamodule, model


def throughput(model, batches, steps: int, every_step_lm: bool) -> dict[str, float]:
    """Examples and real tokens per second over ``steps`` optimisation steps (after one warm-up)."""
    optimizer = torch.optim.AdamW(model.encoder.parameters(), lr=1e-4)
    model.train()
    examples = tokens = 0
    elapsed = 0.0
    for i, batch in enumerate(batches[: steps + 1]):
        if every_step_lm:
            model.embedder.clear_cache()  # no caching: the LM runs on every step, as if un-cached
        start = time.perf_counter()
        logits = model(batch)
        mask = batch["node_mask"]
        loss = model.loss(logits[mask], batch["node_labels"][mask])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i == 0:
            continue  # warm-up step: allocator, kernels, first cache fill
        elapsed += time.perf_counter() - start
        examples += batch["input_ids"].shape[0]
        tokens += int(batch["attention_mask"].sum())
    return {"steps": steps, "examples_per_s": examples / elapsed, "tokens_per_s": tokens / elapsed,
            "s_per_step": elapsed / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12, help="timed steps with embedder.layer=0")
    parser.add_argument("--lm-steps", type=int, default=3, help="timed steps running the LM each step")
    args = parser.parse_args()

    cfg, datamodule, table_model = default_objects([])
    batches = list(datamodule.train_dataloader())
    n_layers = None
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; default config: "
          f"d_model={table_model.encoder.config.d_model}, layers={table_model.encoder.config.n_layers}, "
          f"batch_size={cfg.data.batch_size}, mean tokens/example="
          f"{sum(len(e.input_ids) for e in datamodule.datasets['train']) / len(datamodule.datasets['train']):.0f}")
    rows = {"embedder.layer=0 (table lookup)": throughput(table_model, batches, args.steps, False)}
    del table_model
    from model.lm import load_causal_lm

    n_layers = load_causal_lm()[0].config.num_hidden_layers
    _, _, lm_model = default_objects([f"model.embedder.layer={n_layers}"])
    rows[f"embedder.layer={n_layers} (whole LM every step)"] = throughput(lm_model, batches, args.lm_steps, True)
    print(f"{'embedder':42s} {'steps':>5s} {'s/step':>8s} {'examples/s':>11s} {'tokens/s':>10s}")
    for name, r in rows.items():
        print(f"{name:42s} {r['steps']:5d} {r['s_per_step']:8.3f} {r['examples_per_s']:11.1f} {r['tokens_per_s']:10.0f}")
    a, b = rows.values()
    print(f"ratio layer=0 / whole LM every step: {a['examples_per_s'] / b['examples_per_s']:.1f}x examples/s")


if __name__ == "__main__":
    main()
