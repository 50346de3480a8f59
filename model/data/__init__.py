"""Data: dataset and prediction loading, safe execution labels (and, beside them, the demo corpus,
perturbations and node-model examples). Only the light, stdlib-only loaders are re-exported here."""

from model.data.datasets import Question, database_path, load_questions, load_schemas
from model.data.execution import OUTCOMES, execute_pairs, execute_sql, summarize
from model.data.predictions import Prediction, load_predictions

__all__ = [
    "OUTCOMES",
    "Prediction",
    "Question",
    "database_path",
    "execute_pairs",
    "execute_sql",
    "load_predictions",
    "load_questions",
    "load_schemas",
    "summarize",
]
