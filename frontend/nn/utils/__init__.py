"""`flow.nn.utils`: gradient clipping (`clip_grad_norm_`, `clip_grad_value_`)."""

from __future__ import annotations

from ._clip import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
