"""Optimizers (`flow.optim`)."""
