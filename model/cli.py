"""What every command does with a user's mistake: one line naming the input, exit code 2,
no traceback. Library code raises ``UsageError`` (or a ValueError / FileNotFoundError that
names the input); entry points wrap their body in ``user_errors``."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from model.errors import UsageError


@contextmanager
def user_errors(prog: str, run_dir: str | Path | None = None) -> Iterator[None]:
    """Turn ``UsageError`` (and a missing mandatory Hydra value) into ``prog: error: ...`` on
    stderr and exit code 2; ``run_dir``, when it holds nothing but Hydra's own records, is
    removed so that a mistake leaves no junk run directory behind."""
    from hydra.errors import InstantiationException
    from omegaconf.errors import MissingMandatoryValue

    try:
        yield
    except (UsageError, MissingMandatoryValue, InstantiationException) as e:
        if isinstance(e, InstantiationException):  # a config object's own check, e.g. data.protocol
            if not isinstance(e.__cause__, UsageError):
                raise
            e = e.__cause__
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, MissingMandatoryValue):
            key = getattr(e, "full_key", None) or "a value"
            message = f"{key} is required (set it on the command line: {key}=...)"
        print(f"{prog}: error: {message}", file=sys.stderr)
        _remove_if_only_records(run_dir)
        raise SystemExit(2) from None


def _remove_if_only_records(run_dir: str | Path | None) -> None:
    if not run_dir:
        return
    run_dir = Path(run_dir)
    if run_dir.is_dir() and all(p.name in (".hydra", "train.log", "evaluate.log") for p in run_dir.iterdir()):
        shutil.rmtree(run_dir, ignore_errors=True)
