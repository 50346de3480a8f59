"""The optional parts of the install. The core install scores SQL with a saved model
(``Scorer``, ``rat-score``, ``rat-adapt``, ``rat-calibrate``, ``rat-exec``); the extras add the
rest: ``[train]`` (``train.py``, ``evaluate.py``, the neural node models, the language models),
``[serve]`` (``rat-serve``), ``[mcp]`` (``rat-mcp``) and ``[langchain]`` (the LangChain tool).
A command whose extra is missing says so in one line (exit 2).

>>> sorted(EXTRAS)
['langchain', 'mcp', 'serve', 'train']
>>> with needs_extra("serve", "rat-serve"):
...     import json  # present: nothing happens
>>> with needs_extra("serve", "rat-serve"):  # uvicorn missing: one line on stderr, exit 2
...     raise ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn")
Traceback (most recent call last):
SystemExit: 2
>>> with needs_extra("serve", "rat-serve"):  # not the extra's: raised as it is
...     import no_such_module_here
Traceback (most recent call last):
ModuleNotFoundError: No module named 'no_such_module_here'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

# The top-level modules each extra installs (pyproject.toml's optional dependencies).
EXTRAS = {
    "train": ("torch", "lightning", "transformers", "sentence_transformers", "hydra", "omegaconf",
              "wandb", "matplotlib", "safetensors", "gguf", "accelerate"),
    "serve": ("fastapi", "uvicorn", "starlette", "h11"),
    "mcp": ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio", "httpx", "httpx_sse", "sse_starlette",
            "starlette", "jsonschema", "pydantic_settings"),
    "langchain": ("langchain_core", "langsmith", "pydantic", "pydantic_core", "jsonpatch", "tenacity", "yaml"),
}


def install_hint(extra: str) -> str:
    """How to install ``extra``.

    >>> install_hint("serve").split(" (")[0]
    "pip install 'rat-confidence[serve]'"
    """
    return (f"pip install 'rat-confidence[{extra}]' (in the repository: pip install -e '.[{extra}]'; "
            f"make setup installs every extra)")


@contextmanager
def needs_extra(extra: str, command: str) -> Iterator[None]:
    """Run the block; if it fails to import a module of ``extra`` (not installed), print one line
    naming the extra and exit 2. Any other import error is raised as it is."""
    try:
        yield
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in EXTRAS[extra]:
            raise
        print(f"{command}: error: needs the [{extra}] extra ({error.name} is not installed): "
              f"{install_hint(extra)}", file=sys.stderr)
        raise SystemExit(2) from None
