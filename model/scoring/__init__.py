"""Scoring new, unlabelled SQL with a saved node scorer: ``Scorer`` (Python), ``rat-score``
(command line), ``rat-serve`` (HTTP service); ``model.scoring.adapt.adapt`` / ``rat-adapt``: a
saved model fitted again on a consensus teacher's reading of your unlabelled outputs."""

from model.nodes.saved import ModelFileError, SavedModel
from model.scoring.scorer import RowError, ScoredNode, ScoredQuery, Scorer

__all__ = ["ModelFileError", "RowError", "SavedModel", "ScoredNode", "ScoredQuery", "Scorer"]
