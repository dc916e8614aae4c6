"""flow's command-line tools (thin entry points): `flow-opt`, `flow-compile`, `flow-run`."""
