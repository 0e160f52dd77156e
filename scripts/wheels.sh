#!/usr/bin/env bash
# Download the wheels a GPU host without a package registry lacks (x86-64 Linux, CPython 3.12)
# into .whl/ (WHEEL_DIR to change it): nvmath-python, the cuBLAS baseline, and any extra pip
# requirement given as an argument. Run it where a registry is reachable, from the project root;
# then, on the GPU host (README, "GPU host without a package registry"):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# --no-deps: the host must already have what nvmath-python needs (cuda-bindings, cuda-core,
# cuda-pathfinder, numpy). PYTHON_VERSION picks another CPython (default 3.12).
set -euo pipefail
dest=${WHEEL_DIR:-.whl}
version=${PYTHON_VERSION:-3.12}
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$version" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest" \
  "nvmath-python==1.0.*" "$@"
ls -la "$dest"
