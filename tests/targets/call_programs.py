"""What test_call_path.py and test_residency.py share: a one-dispatch function (`SCALE`, y = 2x
on 4 floats) and a module-wide private compile cache, so that their compiles neither read
nor fill the suite's cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

SCALE = """\
func.func @scale(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOW_CACHE_DIR", str(tmp_path_factory.mktemp("flow-cache")))
        yield
