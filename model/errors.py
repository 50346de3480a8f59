"""The errors a user sees: each is a mistake in an input, told in one line that names it.

Commands turn them into ``prog: error: <message>`` and exit code 2 (``model.cli.user_errors``);
the service turns them into a 4xx with the message. Library code raises these, never prints.

>>> issubclass(ModelFileError, UsageError) and issubclass(UsageError, ValueError)
True
>>> str(PredictionFileError("runs/a.json", "expected an object or a list, found int"))
'runs/a.json: expected an object or a list, found int'
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AdaptError", "ModelFileError", "PredictionFileError", "RecalibrationError", "UsageError"]


class UsageError(ValueError):
    """A mistake in a command line or in an input file, told to the user in one line."""


class ModelFileError(UsageError):
    """A model directory that cannot be used: missing, another feature version, untrusted types."""


class PredictionFileError(UsageError):
    """A prediction file that cannot be read as its format says; the message names the file."""

    def __init__(self, path: Path | str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class AdaptError(UsageError):
    """Models or outputs adaptation cannot use (a teacher that reads no other answers...)."""


class RecalibrationError(UsageError):
    """A labelled sample recalibration cannot use (no right or no wrong node, no gold...)."""
