"""Synthetic data: the embedded demo corpus and perturbations of gold SQL (with the classifier of
how a wrong query differs from gold)."""
