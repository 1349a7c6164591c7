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
    "uv>=0.13,<0.14" "py-rattler>=0.28,<0.29" "packaging>=25"
# The fixture index serves CPython 3.10/3.11 wheels, and a GPU machine may have only 3.12:
# with GPUENV_CARRY_PYTHON=<a 3.11 prefix> (e.g. a pyenv build), its interpreter, shared
# library, headers and standard library (no tests, caches or site-packages: about 13 MB
# compressed) travel too, unpacked there at the same absolute path (its RUNPATH is absolute).
if [ -n "${GPUENV_CARRY_PYTHON:-}" ]; then
    prefix=$(cd "$GPUENV_CARRY_PYTHON" && pwd)
    tar -cJf "$dest/python.tar.xz" --exclude='__pycache__' \
        --exclude='lib/python3.*/site-packages/*' --exclude='lib/python3.*/test' \
        --exclude='lib/python3.*/config-*' --exclude='lib/python3.*/tkinter' \
        --exclude='lib/python3.*/idlelib' --exclude='lib/python3.*/lib2to3' \
        --exclude='lib/python3.*/turtledemo' --exclude='lib/python3.*/ensurepip' \
        --exclude='lib/python3.*/lib-dynload/_tkinter*' --exclude='lib/libpython*.a' \
        --exclude='share' -C / "${prefix#/}"
    echo "$prefix" >"$dest/python.prefix"
fi
ls -la "$dest"
du -sh "$dest"
