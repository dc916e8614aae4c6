"""`flow.amp`: mixed precision — `autocast` and dynamic loss scaling (`GradScaler`)."""

from __future__ import annotations

from ._autocast import autocast, autocast_key, get_autocast_dtype, is_autocast_enabled
from ._grad_scaler import GradScaler, StaticGradScaler

__all__ = ["GradScaler", "StaticGradScaler", "autocast", "autocast_key", "get_autocast_dtype",
           "is_autocast_enabled"]
