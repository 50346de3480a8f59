"""Sentence embeddings of short texts (schema names, questions) with the packaged
all-MiniLM-L6-v2 (sentence-transformers), cached in memory and on disk by content.

Perturbations pick similar schema items with them (``model.synth.perturb``) and the node
features compare schema names with the question (``model.nodes.features``).
"""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from model.data.cache import cache_dir as project_cache_dir

SENTENCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_MODEL = None
_MEMORY: dict[str, np.ndarray] = {}


def sentence_model():
    """The SentenceTransformer (loaded once per process, on the CPU)."""
    global _MODEL
    if _MODEL is None:
        from sentence_transformers import SentenceTransformer

        from model.lm.load import packaged_path

        _MODEL = SentenceTransformer(str(packaged_path(SENTENCE_MODEL) or SENTENCE_MODEL), device="cpu")
    return _MODEL


def embed_texts(texts: list[str]) -> np.ndarray:
    """``(len(texts), 384)`` unit-norm float32 embeddings; one disk file per distinct list.

    >>> v = embed_texts(["singer name", "name of the singer", "stadium capacity"])
    >>> bool(v[0] @ v[1] > v[0] @ v[2])
    True
    """
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:24]
    if key in _MEMORY:
        return _MEMORY[key]
    path = project_cache_dir("schema_embeddings") / f"{key}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        vectors = sentence_model().encode(list(texts), normalize_embeddings=True, batch_size=128,
                                          show_progress_bar=False).astype(np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, vectors)
        tmp.replace(path)
    _MEMORY[key] = vectors
    return vectors


def natural_name(item: str) -> str:
    """'order_items.unit_price' -> 'order items unit price' (the text that gets embedded).

    >>> natural_name("Order_Items.unitPrice")
    'order items unit price'
    """
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", item)
    return re.sub(r"[._\s]+", " ", spaced).strip().lower()


def embed_items(items: list[str]) -> np.ndarray:
    """Unit-norm MiniLM embeddings of schema items (their ``natural_name``), cached by content."""
    return embed_texts([natural_name(i) for i in items])
