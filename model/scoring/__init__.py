"""Scoring new, unlabelled SQL with a saved node scorer: ``Scorer`` (Python), ``rat-score``
(command line), ``rat-serve`` (HTTP service)."""

from model.nodes.saved import ModelFileError, SavedModel
from model.scoring.scorer import RowError, ScoredNode, ScoredQuery, Scorer

__all__ = ["ModelFileError", "RowError", "SavedModel", "ScoredNode", "ScoredQuery", "Scorer"]
