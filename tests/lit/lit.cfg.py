"""lit configuration for flow's FileCheck tests (`lit -v tests/lit`)."""
# ruff: noqa: F821 - lit provides `config` when it runs this file

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import lit.formats

config.name = "flow"
config.test_format = lit.formats.ShTest(False)
config.suffixes = [".mlir", ".py"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Output", "lit.cfg.py", "__pycache__"]

python = sys.executable


def _iree_tool(name: str) -> str:
    """The real IREE binary (the console scripts are slow Python wrappers)."""
    spec = importlib.util.find_spec("iree.compiler")
    if spec and spec.submodule_search_locations:
        path = os.path.join(spec.submodule_search_locations[0], "_mlir_libs", name)
        if os.path.exists(path):
            return path
    return shutil.which(name) or name


def _iree_runtime_tool(name: str) -> str:
    """A binary of the IREE runtime wheel (e.g. `iree-dump-module`), not its pyenv shim."""
    spec = importlib.util.find_spec("iree._runtime_libs")
    if spec and spec.submodule_search_locations:
        path = os.path.join(spec.submodule_search_locations[0], name)
        if os.path.exists(path):
            return path
    return shutil.which(name) or name


def _filecheck() -> str:
    exe = shutil.which("filecheck")
    return exe if exe else f"{python} -m filecheck"


# Substitutions are regexes; anchor tool names so paths and longer names are left alone.
def _tool(name: str) -> str:
    return rf"(?<![\w./-]){name}(?![\w.-])"


config.substitutions.extend(
    [
        ("%python", python),
        (_tool("flow-opt"), f"{python} -m flow.tools.opt"),
        (_tool("flow-compile"), f"{python} -m flow.tools.compile"),
        (_tool("flow-run"), f"{python} -m flow.tools.run"),
        (_tool("FileCheck"), _filecheck()),
        (_tool("iree-opt"), _iree_tool("iree-opt")),
        (_tool("iree-compile"), _iree_tool("iree-compile")),
        (_tool("iree-dump-module"), _iree_runtime_tool("iree-dump-module")),
    ]
)

# Pass through the environment the tools read.
for var in ("HOME", "PYTHONPATH", "FLOW_CACHE_DIR", "FLOW_DUMP_IR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
