"""flow.compile: staged compilation of frontend code with IREE.

staging.py is the one path `flow.jit` (jit.py) and `nn.Graph` (graph.py, the engine behind
flow.nn.Graph) share: a call's key before tracing (signature.py), `stage` (trace to flow IR),
compile once per key, call. stages.py holds the stages themselves (`Lowered`, `Compiled`);
per_rank.py compiles a global program's partition for one rank.
"""
