"""Scoring new, unlabelled SQL with a saved node model: ``Scorer`` (Python), ``rat-score``
(command line), ``rat-serve`` (HTTP service); ``model.scoring.adapt.adapt`` / ``rat-adapt``: a
saved model fitted again on a consensus teacher's reading of your unlabelled outputs."""

from model.errors import ModelFileError
from model.scoring.scorer import RowError, ScoredNode, ScoredQuery, Scorer
from model.scoring.verdict import QueryHeld, Verdict, guard

__all__ = ["ModelFileError", "QueryHeld", "RowError", "ScoredNode", "ScoredQuery", "Scorer", "Verdict", "guard"]
