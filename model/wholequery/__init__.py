"""Whole-query confidence: base scores (token probabilities, SCF, execution agreement, node
confidences) -> calibrators (PS, isotonic, MPS) -> metrics per system. CLI: ``python -m
model.wholequery``."""

from model.wholequery.base_scores import (
    NODE_COLUMNS,
    BaseScores,
    add_node_confidences,
    add_pooled_scores,
    build_base_scores,
    generate_lm_samples,
    node_confidences_from_checkpoint,
    read_node_confidences,
)
from model.wholequery.methods import (
    Method,
    default_methods,
    evaluate_methods,
    fit_calibrators,
    format_tables,
    mps_weight_report,
    sources,
)

__all__ = [
    "NODE_COLUMNS",
    "BaseScores",
    "Method",
    "add_node_confidences",
    "add_pooled_scores",
    "build_base_scores",
    "default_methods",
    "evaluate_methods",
    "fit_calibrators",
    "format_tables",
    "generate_lm_samples",
    "mps_weight_report",
    "node_confidences_from_checkpoint",
    "read_node_confidences",
    "sources",
]
