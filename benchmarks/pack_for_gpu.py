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

A fine-tuned encoder (``model=minilm``) needs all its weights, not a table: the pack then holds
``encoder/``, the encoder in float16 with the vocabulary rows no example uses set to zero
(gzipped: 87 MiB become about 20), and on the GPU machine

    python benchmarks/pack_for_gpu.py --unpack gpu_pack/encoder --hf-home /tmp/hf

rebuilds it in float32 as the hub id's snapshot in a Hugging Face cache, so the run loads it
through the ordinary ``from_pretrained`` with ``HF_HOME=/tmp/hf HF_HUB_OFFLINE=1`` and the same
overrides as here. Rows no example uses never reach the model, so zeroing them changes nothing;
the float16 rounding of the pretrained weights is the one difference.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for sources.jsonl.gz and table.safetensors (or encoder/)")
    parser.add_argument("--unpack", help="an encoder/ folder of a pack: rebuild the encoder (with --hf-home)")
    parser.add_argument("--hf-home", help="with --unpack: the Hugging Face cache folder (HF_HOME) to write")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("overrides", nargs="*", help="train.py overrides (the run to pack)")
    args = parser.parse_args(argv)

    from model.cli import user_errors

    if args.unpack:
        if not args.hf_home:
            parser.error("--unpack needs --hf-home")
        with user_errors("pack_for_gpu.py"):
            print(unpack_encoder(Path(args.unpack), Path(args.hf_home)))
        return 0
    if not args.out:
        parser.error("--out is required")
    with user_errors("pack_for_gpu.py"):
        return pack(args, Path(args.out))


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
    if e.get("fine_tune"):
        rows = export_encoder(ids, out / "encoder", e.name_or_path)
        names, overrides = ("sources.jsonl.gz", "encoder/model.safetensors.gz"), ""
        print(f"encoder: {e.name_or_path}, {rows} vocabulary rows kept (float16)")
    else:
        rows = export_table(ids, out / "table.safetensors", e.name_or_path, e.gguf_file, e.lm_cache_dir, args.dtype)
        names, overrides = ("sources.jsonl.gz", "table.safetensors"), f" model.embedder.table={out / 'table.safetensors'}"
        print(f"table: {rows} token rows of {e.name_or_path or 'smollm2-packaged'} ({args.dtype})")
    for name in names:
        print(f"{out / name}: {(out / name).stat().st_size / 2**20:.1f} MiB")
    print(f"train.py overrides: data.sources_file={out / 'sources.jsonl.gz'}{overrides}")
    return 0


PACK_FILES = ("model.safetensors.gz", "hub_id.json")  # the rest of encoder/ is the config and tokenizer


def export_encoder(ids, folder: Path, name_or_path: str) -> int:
    """Write ``name_or_path``'s encoder (loaded as the run loads it, ``model.lm.load_encoder``) to
    ``folder``: its config and tokenizer, and its weights in float16, gzipped, with the input
    embedding rows outside ``ids`` zeroed. Returns the number of rows kept."""
    import gzip
    import json

    import torch
    from safetensors.torch import save

    from model.cli import UsageError
    from model.lm.load import load_encoder

    try:
        encoder, tokenizer = load_encoder(name_or_path)
    except OSError as err:
        raise UsageError(str(err)) from None
    rows = encoder.get_input_embeddings().weight
    keep = torch.zeros(rows.shape[0], dtype=torch.bool)
    keep[sorted(int(i) for i in ids)] = True
    with torch.no_grad():
        rows[~keep] = 0
    folder.mkdir(parents=True, exist_ok=True)
    encoder.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    weights = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in encoder.state_dict().items()}
    (folder / "model.safetensors.gz").write_bytes(gzip.compress(save(weights), compresslevel=9, mtime=0))
    (folder / "hub_id.json").write_text(json.dumps({"hub_id": str(name_or_path)}))
    return int(keep.sum())


def unpack_encoder(folder: Path, hf_home: Path) -> Path:
    """Rebuild ``export_encoder``'s encoder in float32 as its hub id's snapshot under ``hf_home``
    (``<hf_home>/hub/models--org--name/snapshots/pack``); returns the snapshot folder."""
    import gzip
    import json
    import shutil

    from safetensors.torch import load, save_file

    from model.cli import UsageError

    if not (folder / "hub_id.json").is_file() or not (folder / "model.safetensors.gz").is_file():
        raise UsageError(f"--unpack {folder}: not an encoder/ folder of a pack (hub_id.json, model.safetensors.gz)")
    try:
        hub_id = str(json.loads((folder / "hub_id.json").read_text())["hub_id"])
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"--unpack {folder}: hub_id.json does not name the hub id ({{\"hub_id\": ...}})") from None
    repo = hf_home / "hub" / ("models--" + hub_id.replace("/", "--"))
    snapshot = repo / "snapshots" / "pack"
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("pack")
    for path in folder.iterdir():
        if path.is_file() and path.name not in PACK_FILES:
            shutil.copy(path, snapshot / path.name)
    weights = load(gzip.decompress((folder / "model.safetensors.gz").read_bytes()))
    part = snapshot / f"model.safetensors.{os.getpid()}"  # then renamed: runs unpacking side by side are safe
    save_file({k: v.float() if v.is_floating_point() else v for k, v in weights.items()},
              str(part), metadata={"format": "pt"})
    os.replace(part, snapshot / "model.safetensors")
    return snapshot


if __name__ == "__main__":
    raise SystemExit(main())
