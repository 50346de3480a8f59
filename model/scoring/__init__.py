"""Scoring new, unlabelled SQL with a saved node model: ``Scorer`` (Python), ``rat-score``
(command line), ``rat-serve`` (HTTP service); ``model.scoring.adapt.adapt`` / ``rat-adapt``: a
saved model fitted again on a consensus teacher's reading of your unlabelled outputs."""

from model.errors import ModelFileError
from model.scoring.scorer import RowError, ScoredNode, ScoredQuery, Scorer

__all__ = ["Choice", "ModelFileError", "QueryHeld", "RowError", "ScoredNode", "ScoredQuery", "Scorer", "Verdict",
           "guard"]
VERDICT_NAMES = ("QueryHeld", "Verdict", "guard")  # from model.scoring.verdict, on first use


def __getattr__(name: str):
    if name in VERDICT_NAMES:
        from model.scoring import verdict

        return getattr(verdict, name)
    if name == "Choice":  # what Scorer.choose gives
        from model.scoring.choice import Choice

        return Choice
    raise AttributeError(f"module 'model.scoring' has no attribute {name!r}")
