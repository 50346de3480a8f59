"""Where prepared data is cached: one answer for every cache of the project.

``$RAT_CACHE`` when set and not empty; else, run from a source checkout (the packages beside
the repository's ``pyproject.toml``), the checkout's ``.cache``; else (an installed package)
the user's cache folder, ``~/.cache/rat-confidence`` on Linux (``platformdirs``), never a folder
inside the installed package. Each cache is a sub-folder (``exec``, ``examples``, ``models``,
``schema_embeddings``, ``demo``...).

>>> import os; saved = os.environ.get("RAT_CACHE")
>>> os.environ["RAT_CACHE"] = "/tmp/rc"; str(cache_dir("exec"))
'/tmp/rc/exec'
>>> os.environ["RAT_CACHE"] = ""; cache_dir("demo") == REPO / ".cache" / "demo"  # this checkout
True
>>> _ = os.environ.pop("RAT_CACHE") if saved is None else os.environ.update(RAT_CACHE=saved)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# The folder that holds the `model` and `rat` packages: a source checkout's root, or
# site-packages in an installed package.
REPO = Path(__file__).resolve().parents[2]


def cache_root(environ: Mapping[str, str] = os.environ, packages: Path = REPO) -> Path:
    """The root of every cache (not created), for ``environ`` and packages installed in
    ``packages``.

    >>> str(cache_root({"RAT_CACHE": "/tmp/rc"}))
    '/tmp/rc'
    >>> cache_root({}) == REPO / ".cache"  # a source checkout: the folder holds pyproject.toml
    True
    >>> import tempfile; site = Path(tempfile.mkdtemp())  # an installed package: no pyproject.toml
    >>> root = cache_root({}, packages=site); root.name, root.is_relative_to(site)
    ('rat-confidence', False)
    """
    if environ.get("RAT_CACHE"):
        return Path(environ["RAT_CACHE"]).expanduser()
    if (packages / "pyproject.toml").is_file():
        return packages / ".cache"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rat-confidence", appauthor=False))


def cache_dir(*parts: str) -> Path:
    """The cache folder (not created), joined with ``parts``."""
    return cache_root().joinpath(*parts)
