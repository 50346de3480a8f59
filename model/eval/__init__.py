"""Evaluation: metrics, calibrators, abstention, baselines, plots and reports. Pure functions of
confidences and labels, except ``plots`` and ``report`` which draw and format them."""
