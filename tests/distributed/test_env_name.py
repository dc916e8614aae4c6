"""`flow.env` is the public name of `flow.distributed.env`: the same functions, nothing missing."""

from __future__ import annotations

import flow
import flow.distributed.env as defining
import flow.env


def test_flow_env_exports_every_function_of_the_defining_module():
    public = {n for n, v in vars(defining).items() if callable(v) and not n.startswith("_")
              and getattr(v, "__module__", None) == defining.__name__}  # fmt: skip
    assert public == set(defining.__all__), "flow.distributed.env.__all__ is incomplete"
    assert set(flow.env.__all__) == public
    for name in public:
        assert getattr(flow.env, name) is getattr(defining, name), name
    assert flow.env is flow.__dict__["env"]
