#!/usr/bin/env bash
# On-GPU check of `gpuenv verify` (issue 6), for a machine with a GPU and no network.
#
#   bash bench/gpu/check.sh            # writes its files to $OUT when set
#
# 1. installs gpuenv from the wheels beside this script (bench/gpu/wheels, made by
#    bench/gpu/make_wheelhouse.sh on a machine with network) into a fresh venv;
# 2. verifies the machine's own torch: gpuenv verify --python "$(command -v python3)";
# 3. plants faults and shows each is caught (bench/gpu/check.py): a stray libnccl on
#    LD_LIBRARY_PATH and in LD_PRELOAD, hidden GPUs, a CPU-only torch, a bogus libcudnn,
#    cuDNN None;
# 4. prints a summary table with timings and the bf16 TFLOP/s (summary.txt/json).
#
# Environment: GPUENV_WHEELS (the wheel directory), GPUENV_CHECK_PYTHON (the interpreter
# to verify; default python3 on PATH). Each step is timed and a failed step does not stop
# the others. Exit 0 only when every step met its expectation.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
wheels=${GPUENV_WHEELS:-$here/wheels}
out=${OUT:-$(mktemp -d /tmp/gpuenv-check-out.XXXXXX)}
work=$(mktemp -d /tmp/gpuenv-check.XXXXXX)
python=${GPUENV_CHECK_PYTHON:-$(command -v python3)}
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT

timed() { # name command...: run, log, time; never stops the script
    local name=$1 start end rc
    shift
    start=$(date +%s%N)
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    end=$(date +%s%N)
    printf '%-28s exit %-3s %6d ms\n' "$name" "$rc" "$(((end - start) / 1000000))" | tee -a "$out/steps.txt"
    return "$rc"
}

echo "interpreter under test: $python ($("$python" --version 2>&1))" | tee "$out/steps.txt"
command -v nvidia-smi >/dev/null && nvidia-smi >"$out/nvidia-smi.txt" 2>&1

# gpuenv: a venv from the carried wheels; else pip --target; else the source tree.
gpuenv_py=""
if timed make-venv "$python" -m venv "$work/venv" &&
    timed install-gpuenv "$work/venv/bin/python" -m pip install --no-index --find-links "$wheels" gpuenv; then
    gpuenv_py="$work/venv/bin/python"
elif timed install-gpuenv-target "$python" -m pip install --no-index --find-links "$wheels" \
    --target "$work/site" gpuenv; then
    gpuenv_py="$work/gpuenv-python"
    printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$work/site" "$python" >"$gpuenv_py"
    chmod +x "$gpuenv_py"
else
    echo "no wheel install worked; trying the source tree ($repo/src)" | tee -a "$out/steps.txt"
    gpuenv_py="$work/gpuenv-python"
    printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$repo/src" "$python" >"$gpuenv_py"
    chmod +x "$gpuenv_py"
fi
timed gpuenv-version "$gpuenv_py" -m gpuenv --version && cat "$out/gpuenv-version.log"

"$gpuenv_py" "$here/check.py" --python "$python" --gpuenv "$gpuenv_py -m gpuenv" \
    --out "$out" --work "$work" 2>&1 | tee "$out/check.log"
rc=${PIPESTATUS[0]}
echo "files in $out"
exit "$rc"
