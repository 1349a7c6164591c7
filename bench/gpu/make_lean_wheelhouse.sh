#!/usr/bin/env bash
# The wheels bench/gpu/device.sh installs on a GPU machine without network whose Python
# already has torch, pytest, rich, packaging, pyyaml, filelock and nvidia-ml-py: gpuenv
# itself and only what such a machine lacks (pydantic, tomlkit, uv, py-rattler), for its
# Python (default 3.12, x86_64). Small enough to travel with the working tree.
#
#   bash bench/gpu/make_lean_wheelhouse.sh [PYTHON_VERSION]   # -> .whl/
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
pyver=${1:-3.12}
abi="cp${pyver/./}"
dest=$repo/.whl
pip=${PIP:-$repo/.venv/bin/pip}
rm -rf "$dest"
mkdir -p "$dest"
"$pip" wheel -q --no-deps --wheel-dir "$dest" "$repo"
"$pip" download -q --dest "$dest" --only-binary=:all: --python-version "$pyver" \
    --implementation cp --abi "$abi" --abi abi3 --abi none \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any \
    pydantic tomlkit \
    "uv>=0.13,<0.14" "py-rattler>=0.28,<0.29" "packaging>=25" dockerfile
ls -la "$dest"
du -sh "$dest"
