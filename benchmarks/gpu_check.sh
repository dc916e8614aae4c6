#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU and nothing but this repository, set flow up and
# exercise the cuda target within 10 minutes (every step has a time limit, and all of them
# together a budget: a step the budget has no room for is reported as skipped).
#
#     bash benchmarks/gpu_check.sh
#
# Steps, in this order (a summary table at the end; logs in $FLOW_GPU_LOGS, default a fresh
# /tmp folder):
#   setup       python -m venv + pip install -e '.[test]' (an existing venv is updated)
#   driver      IREE's cuda driver sees the GPU; flow.targets.available() lists cuda
#   module      flow-compile a small MLP for cuda (sm_80 code; newer GPUs run it through the
#               driver's PTX JIT) and run it with flow-run; the result is checked
#   benchmark   benchmarks/train_step.py --target cuda (the MLP step as one nn.Graph program)
#   op-samples  every public op's sample compiled for cuda against the eager (numpy) op
#               (tests/targets/test_op_samples.py, FLOW_TEST_TARGET=cuda, its cuda cases only:
#               8 batches of samples, one module each, in 4 processes)
#   dp-compile  a data-parallel MLP step traced by flow.jit on 2 ranks (MPI on the CPU) and
#               compiled per rank with IREE's native collectives for cuda and rocm, and
#               flow-lower-collectives-native checked exactly against a numpy model of IREE's
#               collectives (tests/targets/test_native_collectives.py; compile only)
#   dp-run      data- and tensor-parallel nn.Graph training steps on 2 ranks with a cuda
#               placement, equal to single-device training (tests/distributed/
#               test_device_parallel.py, FLOW_TEST_TARGET=cuda). flow's runtime runs the
#               collectives over MPI, staging the GPU's buffers through host memory; ranks of a
#               node spread over its GPUs (one GPU: both ranks share it). IREE's native NCCL
#               collectives are compiled (dp-compile) but not run: flow's runtime does not set
#               up NCCL channels.
#   op-tests    the numeric op tests of tests/frontend with their flow.jit side on cuda
#               (FLOW_TEST_TARGET=cuda; one process per file)
#
# Environment:
#   FLOW_GPU_VENV=DIR     the venv to create or reuse (default: .venv-gpu in the repository)
#   FLOW_GPU_PYTHON=EXE   the python that makes the venv (default: python3)
#   FLOW_GPU_NO_VENV=1    use FLOW_GPU_PYTHON as it is (flow and its test extra installed)
#   FLOW_GPU_BUDGET=S     seconds for all steps together (default 600)
#   FLOW_GPU_TARGET=T     check another target the same way (default cuda; e.g. vulkan, which
#                         runs on the CPU through Mesa lavapipe: a dry run of this script)
#   PIP_INDEX_URL, PIP_FIND_LINKS, ...   for a machine that reaches no package index
# Exit status: 0 when every step that ran passed, 1 otherwise, 2 with no NVIDIA GPU.

set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE_PY=${FLOW_GPU_PYTHON:-python3}
TARGET=${FLOW_GPU_TARGET:-cuda}
BUDGET=${FLOW_GPU_BUDGET:-600}
export REPO BASE_PY TARGET # read by the step functions, which run in child shells
STARTED=$SECONDS
declare -a NAMES=() STATUSES=() TIMES=() NOTES=()

record() { # name status seconds note
    NAMES+=("$1")
    STATUSES+=("$2")
    TIMES+=("$3")
    NOTES+=("$4")
    printf '[%s] %-10s %ss  %s\n' "$2" "$1" "$3" "$4"
}

# step NAME LIMIT_SECONDS COMMAND...: run with a time limit (cut to what is left of the budget),
# log to $LOGS/NAME.log, record the outcome; returns the command's status.
step() {
    local name=$1 limit=$2 start=$SECONDS status note left
    shift 2
    left=$((BUDGET - (SECONDS - STARTED)))
    if [ "$left" -lt 15 ]; then
        record "$name" SKIP 0 "no time left in the ${BUDGET}s budget"
        return 125
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (limit ${limit}s)"
    if declare -F "$1" >/dev/null; then # a function of this script: run it in a child bash
        timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $1" >"$LOGS/$name.log" 2>&1
    else
        timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    fi
    status=$?
    note=$(tail -n 1 "$LOGS/$name.log" | cut -c1-100)
    case $status in
        0) record "$name" PASS $((SECONDS - start)) "$note" ;;
        124 | 137) record "$name" TIMEOUT $((SECONDS - start)) "over ${limit}s; see $LOGS/$name.log" ;;
        *) record "$name" FAIL $((SECONDS - start)) "$note (see $LOGS/$name.log)" ;;
    esac
    return "$status"
}

summary() {
    echo
    echo "GPU check summary, target $TARGET ($((SECONDS - STARTED)) s; logs in $LOGS)"
    local i failed=0
    for i in "${!NAMES[@]}"; do
        printf '  %-8s %-11s %5ss  %s\n' "${STATUSES[$i]}" "${NAMES[$i]}" "${TIMES[$i]}" "${NOTES[$i]}"
        case ${STATUSES[$i]} in FAIL | TIMEOUT) failed=1 ;; esac
    done
    return $failed
}

# ------------------------------------------------------------------ the GPU
GPUS=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    GPUS=$(nvidia-smi -L | grep -c '^GPU ')
    nvidia-smi -L
elif [ "$TARGET" = cuda ]; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi finds none): nothing to check" >&2
    exit 2
fi
LOGS=${FLOW_GPU_LOGS:-$(mktemp -d /tmp/flow-gpu-check.XXXXXX)}
mkdir -p "$LOGS"
export LOGS
echo "repository: $REPO; target: $TARGET; logs: $LOGS"

# ------------------------------------------------------------------ setup
if [ "${FLOW_GPU_NO_VENV:-0}" = 1 ]; then
    PY=$(command -v "$BASE_PY")
    record setup SKIP 0 "FLOW_GPU_NO_VENV=1: using $PY as it is"
else
    VENV=${FLOW_GPU_VENV:-$REPO/.venv-gpu}
    export VENV
    make_venv() {
        if [ ! -x "$VENV/bin/python" ]; then "$BASE_PY" -m venv "$VENV" || return 1; fi
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$REPO[test]"
    }
    if ! step setup 240 make_venv; then
        echo "gpu_check: could not install flow into $VENV (no package index reachable? set" \
            "PIP_INDEX_URL / PIP_FIND_LINKS, or FLOW_GPU_NO_VENV=1 with a ready python)" >&2
        summary
        exit 1
    fi
    PY=$VENV/bin/python
fi
PATH="$(dirname "$PY"):$PATH"
export PY PATH
export FLOW_CACHE_DIR=${FLOW_CACHE_DIR:-$LOGS/cache}
cd "$REPO" || exit 1

# ------------------------------------------------------------------ driver
step driver 30 "$PY" -c "
import iree.runtime as rt
from flow.targets import available, get_target
driver = get_target('$TARGET').driver
devices = rt.get_driver(driver).query_available_devices()
assert devices, f'the {driver} driver finds no device'
assert '$TARGET' in available(), f'flow.targets.available() = {available()}'
print(f'{len(devices)} {driver} device(s): ' + ', '.join(d['name'] for d in devices))
"
DRIVER_OK=$?

# ------------------------------------------------------------------ module
# x @ w + b, relu, row sums = [4.5, 10.5] (as in tests/lit/targets/compile.mlir).
run_module() {
    "$PY" -m flow.tools.compile tests/lit/targets/compile.mlir --target "$TARGET" \
        -o "$LOGS/mlp_sum.vmfb" || return 1
    "$PY" -m flow.tools.run "$LOGS/mlp_sum.vmfb" --target "$TARGET" --function mlp_sum \
        --input 2x3xf32=1,2,3,4,5,6 --input 3x2xf32=1,0,0,1,1,-1 --input 2xf32=0.5,-1 |
        tee "$LOGS/mlp_sum.out" || return 1
    grep -q '\[ 4.5 10.5\]' "$LOGS/mlp_sum.out"
}

# ------------------------------------------------------------------ op-samples
op_samples() {
    local i pids=() status=0
    for i in 0 1 2 3; do
        FLOW_TEST_TARGET=$TARGET FLOW_TEST_SHARD=$i/4 FLOW_TEST_BATCHES=8 "$PY" -m pytest -q \
            -p no:cacheprovider tests/targets/test_op_samples.py \
            -k "test_public_ops_match_eager and $TARGET" >"$LOGS/op-samples.$i.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || status=1
        echo "shard $i/4: $(tail -n 1 "$LOGS/op-samples.$i.log")"
    done
    return $status
}

# ------------------------------------------------------------------ op-tests
op_tests() {
    local f pids=() names=() status=0 i
    for f in tests/frontend/test_math.py tests/frontend/test_functional.py \
        tests/frontend/test_functional_losses.py tests/frontend/test_functional_norms.py \
        tests/frontend/test_movement.py tests/frontend/test_movement_creation.py \
        tests/frontend/test_movement_ops.py tests/frontend/test_primitives.py \
        tests/frontend/test_window.py tests/frontend/test_random.py; do
        FLOW_TEST_TARGET=$TARGET "$PY" -m pytest -q -p no:cacheprovider "$f" \
            >"$LOGS/op-tests.$(basename "$f" .py).log" 2>&1 &
        pids+=($!)
        names+=("$(basename "$f" .py)")
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || status=1
        echo "${names[$i]}: $(tail -n 1 "$LOGS/op-tests.${names[$i]}.log")"
    done
    return $status
}

if [ "$DRIVER_OK" = 0 ]; then
    step module 60 run_module
    step benchmark 120 "$PY" benchmarks/train_step.py --target "$TARGET" --steps 20
    grep -A2 '^MLP training step' "$LOGS/benchmark.log" 2>/dev/null
    step op-samples 150 op_samples
else
    for s in module benchmark op-samples; do record "$s" SKIP 0 "the $TARGET driver is not usable"; done
fi
step dp-compile 90 "$PY" -m pytest -q -p no:cacheprovider tests/targets/test_native_collectives.py
if [ "$DRIVER_OK" = 0 ]; then
    step dp-run 120 env FLOW_TEST_TARGET="$TARGET" "$PY" -m pytest -q -p no:cacheprovider \
        tests/distributed/test_device_parallel.py -k "$TARGET"
    step op-tests 200 op_tests
else
    for s in dp-run op-tests; do record "$s" SKIP 0 "the $TARGET driver is not usable"; done
fi

summary
