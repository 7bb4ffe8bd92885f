"""Jacobian estimation: the estimators and their registry, their inputs, the paper's experiments; see docs/estimation.md."""
