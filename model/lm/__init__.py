"""The scorer / embedder LM: loading through transformers' ``from_pretrained`` (``load``) and
teacher-forced token probabilities of SQL under it (``scoring``).

The loaders are imported on first use (they import torch), so ``model.lm.sentence`` and
``model.lm.parts`` stay importable in the core install.
"""

__all__ = ["default_cache_dir", "default_lm_path", "load_causal_lm", "load_encoder", "load_tokenizer"]


def __getattr__(name: str):
    if name in __all__:
        from model.lm import load

        return getattr(load, name)
    raise AttributeError(f"module 'model.lm' has no attribute {name!r}")
