#!/usr/bin/env bash
# Build the wheels bench/gpu/check.sh installs on a machine without network: gpuenv
# itself and its dependencies, for the GPU machine's Python (default 3.12, x86_64).
#
#   bash bench/gpu/make_wheelhouse.sh [PYTHON_VERSION]   # -> bench/gpu/wheels/
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pyver=${1:-3.12}
abi="cp${pyver/./}"
dest=$here/wheels
pip=${PIP:-$repo/.venv/bin/pip}
rm -rf "$dest"
mkdir -p "$dest"
"$pip" wheel --no-deps --wheel-dir "$dest" "$repo"
"$pip" download --dest "$dest" --only-binary=:all: --python-version "$pyver" \
    --implementation cp --abi "$abi" --abi abi3 --abi none \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any \
    "$dest"/gpuenv-*.whl
ls -la "$dest"
du -sh "$dest"
