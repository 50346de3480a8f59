"""Pack a node-model run for a machine that has a GPU but neither the data, the databases nor the
LM: the built, tokenized examples (``data.sources_file``) and the LM's input-embedding rows for
the tokens they use (``model.embedder.table``). Both are plain data (gzipped JSON, safetensors).

    python benchmarks/pack_for_gpu.py --out gpu_pack +experiment=qwen_coder_paper \\
        data.root=../shared/data/spider data.use_perturbations=false

prints the sizes, and the train.py overrides that read the pack, e.g. on the GPU machine:

    python train.py +experiment=qwen_coder_paper data.root=gpu_pack data.use_perturbations=false \\
        data.sources_file=gpu_pack/sources.jsonl.gz model.embedder.table=gpu_pack/table.safetensors

The sources file refuses settings it was not built with (``NodeDataModule.sources_key``), and the
table refuses token ids it does not hold, so a mismatched pack fails in one line, not silently.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for sources.jsonl.gz and table.safetensors")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("overrides", nargs="*", help="train.py overrides (the run to pack)")
    args = parser.parse_args(argv)

    from model.cli import user_errors

    out = Path(args.out)
    with user_errors("pack_for_gpu.py"):
        return pack(args, out)


def pack(args, out: Path) -> int:
    import hydra
    from hydra import compose, initialize_config_dir

    from model.nodes.embedder import export_table, table_ids

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["logger=none", *args.overrides,
                                          f"data.sources_file={out / 'sources.jsonl.gz'}"])
    start = time.perf_counter()
    datamodule = hydra.utils.instantiate(cfg.data, _convert_="all")
    datamodule.build_sources()
    counts = {name: len(examples) for name, examples in datamodule.sources.items()}
    print(f"sources: {counts} ({time.perf_counter() - start:.0f} s)", flush=True)
    ids = table_ids(datamodule.pad_id, datamodule.sources)
    e = cfg.model.embedder
    rows = export_table(ids, out / "table.safetensors", e.name_or_path, e.gguf_file, e.lm_cache_dir, args.dtype)
    for name in ("sources.jsonl.gz", "table.safetensors"):
        print(f"{out / name}: {(out / name).stat().st_size / 2**20:.1f} MiB")
    print(f"table: {rows} token rows of {e.name_or_path or 'smollm2-packaged'} ({args.dtype})")
    print(f"train.py overrides: data.sources_file={out / 'sources.jsonl.gz'} "
          f"model.embedder.table={out / 'table.safetensors'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
