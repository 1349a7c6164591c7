#!/usr/bin/env bash
# Every GPU check of a round in one call, for a lent GPU machine without network:
#
#   bash bench/gpu/make_lean_wheelhouse.sh      # here, with network: .whl/ (about 45 MB)
#   bash bench/gpu/device.sh                    # there, .whl carried; files go to $OUT
#
# 1. gpuenv and the few dependencies the machine lacks, from .whl, into a venv that sees
#    the machine's own torch (--system-site-packages);
# 2. bench/gpu/check.py: verify the machine's torch, plant faults, bf16 TFLOP/s;
# 3. detect, doctor --deep and the hot-path timings on real hardware;
# 4. the test suite's GPU-side tests (marked torch/gpu, and every test that needs nvcc),
#    which skip on machines without a GPU or toolkit.
# Each step is timed; one failing does not stop the others. Exit 0 when every step met
# its expectation.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$(mktemp -d /tmp/gpuenv-device.XXXXXX)}
work=$(mktemp -d /tmp/gpuenv-device-work.XXXXXX)
wheels=${GPUENV_WHEELS:-$repo/.whl}
python=${GPUENV_CHECK_PYTHON:-$(command -v python3)}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
status=0
# A carried CPython for the fixture index's cp310/cp311 wheels (make_lean_wheelhouse.sh).
if [ -f "$wheels/python.tar.xz" ] && [ -f "$wheels/python.prefix" ]; then
    tar -xJf "$wheels/python.tar.xz" -C / && PATH="$(cat "$wheels/python.prefix")/bin:$PATH"
fi

timed() { # name timeout command...: run, log to $out/name.log, time; never stops the script
    local name=$1 limit=$2 start end rc
    shift 2
    start=$(date +%s%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    end=$(date +%s%N)
    printf '%-26s exit %-3s %7d ms\n' "$name" "$rc" "$(((end - start) / 1000000))" | tee -a "$out/steps.txt"
    [ "$rc" = 0 ] || status=1
    return "$rc"
}

{
    echo "interpreter: $python ($("$python" --version 2>&1))"
    nvidia-smi --query-gpu=name,driver_version,compute_cap,uuid --format=csv 2>&1
    command -v nvcc && nvcc --version | tail -2
    ls /proc/driver/nvidia 2>&1 | head -5
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

# A venv of the base interpreter whose site-packages reach, after its own, those of the
# interpreter under test (itself often a venv, whose packages --system-site-packages
# would not see): gpuenv's carried dependencies first, then torch, pytest, rich, pynvml.
timed venv 120 "$python" -m venv "$work/venv"
"$python" -c 'import site; print("\n".join(site.getsitepackages()))' \
    >"$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/zz-tested.pth"
timed install 180 "$work/venv/bin/python" -m pip install -q --no-index --no-deps \
    --no-build-isolation "$wheels"/*.whl
gpuenv="$work/venv/bin/gpuenv"
timed version 30 "$gpuenv" --version && cat "$out/version.log"

# 2. The machine's own torch, verified; planted faults caught.
timed check 300 "$work/venv/bin/python" "$repo/bench/gpu/check.py" --python "$python" \
    --gpuenv "$gpuenv" --out "$out" --work "$work"

# 3. Detection, doctor, hot-path timings on real hardware.
timed detect 60 "$gpuenv" detect --json
timed doctor-deep 240 "$gpuenv" doctor --python "$python" --deep
timed fingerprint 60 "$work/venv/bin/python" -c '
import time
from gpuenv.hardware.fingerprint import fingerprint
t = time.perf_counter(); fp = fingerprint(); ms = (time.perf_counter() - t) * 1e3
print(fp, f"{ms:.2f} ms")'

# 4. The suite's GPU-side tests, run against this machine's torch and nvcc.
cd "$repo" || exit 1
GPUENV_TEST_TORCH_PYTHON="$python" GPUENV_TEST_SLOW=1 timed pytest-gpu 420 \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -rs -m "torch or gpu or not slow" \
    tests/verify/test_torch_real.py tests/doctor/test_torch_real.py tests/builds/test_nvcc.py \
    tests/e2e/test_project_gpu.py
tail -n 30 "$out/pytest-gpu.log"
echo "exit $status; files in $out"
exit "$status"
