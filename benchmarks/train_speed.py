"""Training and inference throughput of the node models on the demo corpus, side by side in one
run: the default frozen SmolLM2 embedder with embedder.layer=0 (a table lookup), the whole LM run
every step, and all-MiniLM-L6-v2 fine-tuned end to end (``model=minilm``) at several input
lengths (``model.encoder.max_positions``).

    .venv/bin/python benchmarks/train_speed.py [--steps 12] [--lm-steps 3] [--minilm-steps 6]
                                              [--minilm-lengths 256,384,512] [--spider ROOT]

Demo inputs are short (~150 tokens); ``--spider ../shared/data/spider`` times Spider dev inputs
(schema + question + tree; median ~150, 90th percentile ~310 MiniLM tokens), where the length cap
matters.

Prints examples/s and tokens/s (real tokens, padding excluded) of full optimisation steps
(forward, loss, backward, optimiser step with the model's own optimiser), examples/s of
inference (no gradients), and the ratios to the table-lookup embedder. Divide a corpus size by
these rates to plan a CPU run (Spider dev cross-fitting: ~6,000 training inputs per fold).
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

from model.cli_types import existing_dir, positive_int

DATA: list[str] = []  # data overrides shared by every configuration (--spider)


def default_objects(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["logger=none", *DATA, *overrides])
    torch.manual_seed(cfg.seed)
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.setup("fit")
    model = instantiate(cfg.model, _convert_="all")
    model.pos_weight.fill_(1.0)
    return cfg, datamodule, model


def throughput(model, batches, steps: int, every_step_lm: bool = False) -> dict[str, float]:
    """Examples and real tokens per second over ``steps`` optimisation steps (after one warm-up),
    then examples per second of inference over the same batches."""
    optimizer = model.configure_optimizers()["optimizer"]
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
    model.eval()
    inferred, inference_s = 0, 0.0
    with torch.no_grad():
        for batch in batches[1: steps + 1]:
            if every_step_lm:
                model.embedder.clear_cache()
            start = time.perf_counter()
            model(batch)
            inference_s += time.perf_counter() - start
            inferred += batch["input_ids"].shape[0]
    return {"steps": steps, "examples_per_s": examples / elapsed, "tokens_per_s": tokens / elapsed,
            "s_per_step": elapsed / steps, "inference_examples_per_s": inferred / inference_s,
            "mean_tokens": tokens / examples}


def lengths(text: str) -> list[int]:
    """``--minilm-lengths``: comma-separated numbers of tokens."""
    return [positive_int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=12, help="timed steps with embedder.layer=0")
    parser.add_argument("--lm-steps", type=positive_int, default=3, help="timed steps running the LM each step")
    parser.add_argument("--minilm-steps", type=positive_int, default=6, help="timed steps of model=minilm")
    parser.add_argument("--minilm-lengths", type=lengths, default="256,384,512", help="model.encoder.max_positions")
    parser.add_argument("--spider", type=existing_dir, default=None, help="a Spider root: time Spider dev inputs")
    args = parser.parse_args()
    if args.spider:
        DATA.extend(["data=spider", f"data.root={args.spider}", "data.protocol=split",
                     "data.train_predictions=null", "++data.max_questions=300"])

    cfg, datamodule, table_model = default_objects(["model=smollm2"])  # a --spider of another layout: one line (__main__)
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
    _, _, lm_model = default_objects(["model=smollm2", f"model.embedder.layer={n_layers}"])
    rows[f"embedder.layer={n_layers} (whole LM every step)"] = throughput(lm_model, batches, args.lm_steps, True)
    del lm_model
    for length in args.minilm_lengths:
        _, minilm_data, minilm = default_objects(["model=minilm", f"model.encoder.max_positions={length}"])
        rows[f"model=minilm, fine-tuned, {length} tokens"] = throughput(
            minilm, list(minilm_data.train_dataloader()), args.minilm_steps)
        del minilm
    print(f"{'node model':42s} {'steps':>5s} {'tokens/ex':>9s} {'s/step':>8s} {'train ex/s':>11s} "
          f"{'tokens/s':>10s} {'infer ex/s':>11s} {'train ratio':>11s}")
    base = rows["embedder.layer=0 (table lookup)"]["examples_per_s"]
    for name, r in rows.items():
        print(f"{name:42s} {r['steps']:5d} {r['mean_tokens']:9.0f} {r['s_per_step']:8.3f} "
              f"{r['examples_per_s']:11.1f} {r['tokens_per_s']:10.0f} {r['inference_examples_per_s']:11.1f} "
              f"{r['examples_per_s'] / base:10.2f}x")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
