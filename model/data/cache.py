"""Where prepared data is cached: one answer for every cache of the project.

``$RAT_CACHE`` when set and not empty, else ``<repo>/.cache``; each cache is a sub-folder
(``exec``, ``examples``, ``models``, ``schema_embeddings``, ``demo``...).

>>> import os; os.environ["RAT_CACHE"] = "/tmp/rc"; str(cache_dir("exec"))
'/tmp/rc/exec'
>>> os.environ["RAT_CACHE"] = ""; cache_dir().name
'.cache'
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cache_dir(*parts: str) -> Path:
    """The cache folder (not created), joined with ``parts``."""
    return Path(os.environ.get("RAT_CACHE") or REPO / ".cache").joinpath(*parts)
