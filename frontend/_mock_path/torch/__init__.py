"""`import torch` turning into flow: `eval $(python -m flow.mock_torch)` puts this folder first
on PYTHONPATH (see flow.mock_torch)."""

import importlib
import os
import sys

import flow.mock_torch as _mock

_mock.enable(lazy=os.environ.get("FLOW_MOCK_TORCH_LAZY") == "1",
             verbose=os.environ.get("FLOW_MOCK_TORCH_VERBOSE") == "1")  # fmt: skip
sys.modules[__name__] = importlib.import_module(__name__)  # flow, through the mock's finder
