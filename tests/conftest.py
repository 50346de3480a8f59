"""Shared fixtures: offline model hubs, the real data folder, the embedded demo corpus."""

import os
from pathlib import Path

import pytest

import rat  # noqa: F401 - before any test module imports sqlglot: RAT_SQLGLOT=pure acts in rat.build

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data (Spider, BIRD, 11 systems' predictions); skips when absent."""
    if not (SHARED_DATA / "spider" / "dev.json").exists():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def full_disk(monkeypatch):
    """A disk that fills while a model is saved: each skops file written is cut short, then
    ``OSError(28)`` (ENOSPC)."""
    import skops.io

    def full(obj, path, *args, **kwargs):
        Path(path).write_bytes(b"PK\x03\x04 half a model")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(skops.io, "dump", full)


# Real PostgreSQL and MariaDB servers (session scope; they skip when not installed).
from tests.servers import (  # noqa: F401
    mysql_admin_url,
    mysql_server,
    mysql_url,
    postgres_admin_url,
    postgres_server,
    postgres_url,
)
