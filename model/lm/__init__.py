"""The scorer / embedder LM: loading through transformers' ``from_pretrained`` (``load``) and
teacher-forced token probabilities of SQL under it (``scoring``)."""

from model.lm.load import (
    default_cache_dir,
    default_lm_path,
    load_causal_lm,
    load_encoder,
    load_tokenizer,
)

__all__ = ["default_cache_dir", "default_lm_path", "load_causal_lm", "load_encoder", "load_tokenizer"]
