"""The frozen embedder: token vectors from a causal LM, never trained, computed at most once per input.

``layer=0`` is the LM's input embedding table alone (the paper's "first layer token embeddings"):
no LM forward at all. ``layer=k>0`` runs only the first ``k`` decoder layers and caches each
input's hidden states (in memory, and on disk when ``cache_dir`` is set), so epochs after the first
read them instead of running the LM again.

A layer-0 embedder can also read an exported table (``table=``): the LM's rows for just the tokens
a data set uses (``export_table``; ``python -m model.nodes.embedder``), a few MB instead of the whole
LM, so a machine that holds neither the LM nor its tokenizer (a lent GPU) trains the same model
from a sources file (``data.sources_file``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import nn

from model.errors import UsageError
from model.lm import load_causal_lm

# Attribute names of the decoder-layer list and the final norm across HF architectures.
_LAYER_LISTS = ("layers", "h", "blocks")
_FINAL_NORMS = ("norm", "ln_f", "final_layernorm", "final_layer_norm")
DTYPES = ("float32", "float16", "bfloat16")  # of the frozen LM's weights


class FrozenEmbedder(nn.Module):
    """``forward(input_ids, attention_mask) -> (batch, tokens, hidden_size)`` float32, no gradients.

    The LM pieces are kept *outside* the module tree (a plain attribute), so checkpoints,
    optimizers, ``parameters()`` and DDP never see them: a checkpoint holds only the trainable
    encoder, and the frozen weights (hundreds of MB, or GB for CodeLlama) are reloaded from the LM.
    ``_apply`` still moves them with the module (``.to(device)``, ``.cuda()``).
    """

    def __init__(
        self,
        name_or_path: str | None = None,
        gguf_file: str | None = None,
        layer: int = 0,
        lm_cache_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        dtype: str = "float32",
        batch_size: int = 8,
        table: str | Path | None = None,
    ):
        super().__init__()
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
            raise UsageError(f"model.embedder.layer must be a whole number of 0 or more; found {layer!r}")
        if dtype not in DTYPES:
            raise UsageError(f"model.embedder.dtype must be one of {', '.join(DTYPES)}; found {dtype!r}"[:300])
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise UsageError(f"model.embedder.batch_size must be a whole number of 1 or more; found {batch_size!r}"[:300])
        if table is not None and layer != 0:
            raise UsageError(f"model.embedder.table holds input-table rows (layer 0); found layer={layer}")
        self.layer = layer
        self._memory: dict[str, torch.Tensor] = {}  # ids digest -> (tokens, hidden_size) float16
        self.batch_size = batch_size  # rows per LM forward when filling the cache (layer > 0)
        self.cache_dir = None
        if table is not None:
            frozen = TableRows.load(table)
            self.hidden_size = frozen.hidden_size
            self.cache_key = f"{Path(table).stem}-layer0"
            self.__dict__["frozen"] = frozen.requires_grad_(False).eval()
            return
        lm, _ = load_causal_lm(name_or_path, gguf_file, lm_cache_dir, dtype=getattr(torch, dtype))
        self.hidden_size: int = lm.config.hidden_size
        name = Path(gguf_file).stem if gguf_file else str(name_or_path or "smollm2-packaged")
        self.cache_key = f"{name.replace('/', '--')}-{dtype}-layer{layer}"
        self.cache_dir = Path(cache_dir) / self.cache_key if cache_dir and layer > 0 else None
        if layer == 0:
            frozen: nn.Module = lm.get_input_embeddings()
        else:
            frozen = _truncated_decoder(lm, layer)
        del lm  # the LM head and the unused layers are freed here
        frozen.requires_grad_(False).eval()
        self.__dict__["frozen"] = frozen  # not a submodule: see the class docstring

    def _apply(self, fn, recurse=True):
        self.__dict__["frozen"] = self.frozen._apply(fn)
        return super()._apply(fn, recurse)

    def clear_cache(self) -> None:
        """Forget the in-memory hidden states (the disk cache, if any, is kept)."""
        self._memory.clear()

    def frozen_parameters(self) -> list[torch.Tensor]:
        """The LM weights actually used (for tests and for counting; never trained)."""
        return list(self.frozen.parameters())

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # input_ids, attention_mask: (batch, tokens); right-padded, mask 1 on real tokens.
        if self.layer == 0:
            return self.frozen(input_ids).float()  # (batch, tokens, hidden_size)
        lengths = attention_mask.sum(dim=1).tolist()
        rows = [input_ids[i, :n] for i, n in enumerate(lengths)]
        vectors = self._cached_hidden_states(rows)  # list of (length_i, hidden_size)
        out = input_ids.new_zeros((*input_ids.shape, self.hidden_size), dtype=torch.float32)
        for i, v in enumerate(vectors):
            out[i, : v.shape[0]] = v.to(out.device, torch.float32)
        return out  # (batch, tokens, hidden_size), zeros at padding

    def _cached_hidden_states(self, rows: list[torch.Tensor]) -> list[torch.Tensor]:
        keys = [_digest(r) for r in rows]
        missing = [i for i, k in enumerate(keys) if k not in self._memory and not self._load(k)]
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            for i, v in zip(chunk, self._run_layers([rows[i] for i in chunk])):
                self._memory[keys[i]] = v
                self._store(keys[i], v)
        return [self._memory[k] for k in keys]

    def _run_layers(self, rows: list[torch.Tensor]) -> list[torch.Tensor]:
        """Hidden states after ``layer`` decoder layers for unpadded id rows (causal, right-padded)."""
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long, device=rows[0].device)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        hidden = self.frozen(input_ids=ids, attention_mask=mask).last_hidden_state  # (rows, width, H)
        # float16 halves the cache; hidden states of early layers are far inside its range.
        return [hidden[i, : len(r)].to("cpu", torch.float16) for i, r in enumerate(rows)]

    def _load(self, key: str) -> bool:
        if self.cache_dir is None:
            return False
        path = self.cache_dir / key[:2] / f"{key}.pt"
        if not path.is_file():
            return False
        self._memory[key] = torch.load(path, weights_only=True)
        return True

    def _store(self, key: str, value: torch.Tensor) -> None:
        if self.cache_dir is None:
            return
        path = self.cache_dir / key[:2] / f"{key}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{id(value)}")
        torch.save(value.clone(), tmp)
        tmp.replace(path)


class TableRows(nn.Module):
    """An LM's input-embedding rows for some token ids: ``forward(input_ids)`` is the LM's own
    lookup for those ids, and an id outside the table is an error naming it (the table was
    exported for other data: a ``UsageError``, one line from train.py)."""

    def __init__(self, ids: torch.Tensor, vectors: torch.Tensor, source: str = "table"):
        super().__init__()
        self.source, self.hidden_size = source, int(vectors.shape[1])
        row_of = torch.full((int(ids.max()) + 1,), -1, dtype=torch.long)
        row_of[ids.long()] = torch.arange(len(ids))
        self.register_buffer("row_of", row_of)  # (largest id + 1,) row of each id, -1 = absent
        self.register_buffer("vectors", vectors)  # (rows, hidden_size)

    @classmethod
    def load(cls, path: str | Path) -> TableRows:
        """Read a table written by ``export_table`` (safetensors: tensors only, nothing executed)."""
        from safetensors.torch import load_file

        path = Path(path)
        if not path.is_file():
            raise UsageError(f"model.embedder.table={path}: no such file (python -m model.nodes.embedder writes it)")
        tensors = load_file(str(path))
        return cls(tensors["ids"], tensors["vectors"], str(path))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        inside = input_ids < len(self.row_of)
        rows = torch.where(inside, self.row_of[input_ids.clamp(max=len(self.row_of) - 1)], -1)
        if bool((rows < 0).any()):
            missing = sorted(set(input_ids[rows < 0].tolist()))
            raise UsageError(f"token ids {missing[:5]} ({len(missing)} in all) are not in the embedding table "
                             f"{self.source}: export it from the sources you train on")
        return self.vectors[rows]  # (batch, tokens, hidden_size)


def table_ids(pad: int, sources: dict[str, list]) -> set[int]:
    """The token ids an exported table needs for ``sources`` (``read_sources``): every input's
    and the padding id."""
    return {pad} | {i for examples in sources.values() for e in examples for i in e.input_ids}


def export_table(ids, path: str | Path, name_or_path: str | None = None, gguf_file: str | None = None,
                 lm_cache_dir: str | Path | None = None, dtype: str = "float16") -> int:
    """Write the LM's input-embedding rows for ``ids`` (and nothing else) to ``path``
    (safetensors); returns the number of rows. ``FrozenEmbedder(table=path)`` reads them."""
    from safetensors.torch import save_file

    lm, _ = load_causal_lm(name_or_path, gguf_file, lm_cache_dir)
    ids = torch.tensor(sorted({int(i) for i in ids}), dtype=torch.long)
    vectors = lm.get_input_embeddings().weight[ids].detach().to(getattr(torch, dtype)).contiguous()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file({"ids": ids, "vectors": vectors}, str(path),
              metadata={"model": str(name_or_path or "smollm2-packaged"), "gguf_file": str(gguf_file or "")})
    return len(ids)


def main(argv: list[str] | None = None) -> int:
    """``python -m model.nodes.embedder --sources <data.sources_file> --out <table> [--model name]``:
    export the input-embedding rows of the tokens in a sources file."""
    import argparse

    from model.errors import user_errors
    from model.nodes.datamodule import read_sources

    parser = argparse.ArgumentParser(prog="python -m model.nodes.embedder", description=main.__doc__)
    parser.add_argument("--sources", required=True, help="a data.sources_file written by train.py")
    parser.add_argument("--out", required=True, help="the table to write (.safetensors)")
    parser.add_argument("--model", default=None, help="the embedder (model.embedder.name_or_path); default: the packaged SmolLM2")
    parser.add_argument("--gguf-file", default=None)
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    args = parser.parse_args(argv)
    with user_errors(parser.prog):
        if not Path(args.sources).is_file():
            raise UsageError(f"--sources {args.sources}: no such file")
        rows = export_table(table_ids(*read_sources(args.sources)), args.out, args.model, args.gguf_file, dtype=args.dtype)
        print(f"{args.out}: {rows} rows of {args.model or 'smollm2-packaged'}'s input embeddings")
    return 0


def _digest(ids: torch.Tensor) -> str:
    """A stable key for one unpadded row of token ids."""
    return hashlib.sha1(np.asarray(ids.tolist(), dtype=np.int64).tobytes()).hexdigest()


def _truncated_decoder(lm: nn.Module, layer: int) -> nn.Module:
    """The LM's base model cut after ``layer`` decoder layers, without the final norm or LM head."""
    base = lm.base_model
    names = [n for n in _LAYER_LISTS if isinstance(getattr(base, n, None), nn.ModuleList)]
    if not names:
        raise ValueError(f"cannot find the decoder layers of {type(base).__name__} (looked for {_LAYER_LISTS})")
    layers = getattr(base, names[0])
    if layer > len(layers):
        raise ValueError(f"embedder layer {layer} exceeds the LM's {len(layers)} layers")
    setattr(base, names[0], layers[:layer])
    for attr in ("num_hidden_layers", "n_layer"):
        if hasattr(base.config, attr):
            setattr(base.config, attr, layer)
    for norm in _FINAL_NORMS:
        if isinstance(getattr(base, norm, None), nn.Module):
            setattr(base, norm, nn.Identity())  # hidden states *after k layers*, not re-normalised
    base.config.use_cache = False
    return base


if __name__ == "__main__":
    raise SystemExit(main())
