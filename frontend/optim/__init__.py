"""Optimizers (`flow.optim`) and learning-rate schedulers (`flow.optim.lr_scheduler`).

PyTorch's classes, arguments and update equations. Updates are flow tensor ops
written back in place and all state is flow tensors, so `optimizer.step()` traces
into the same IR as the forward and backward pass of a compiled training step.
"""

from __future__ import annotations

from . import lr_scheduler
from ._adam import Adam, AdamW
from ._optimizer import Optimizer
from ._rmsprop import RMSprop
from ._sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
