#!/usr/bin/env bash
# Download the wheels a GPU host without a package registry lacks (x86-64 Linux, CPython 3.12)
# into .whl/ (WHEEL_DIR to change it): nvmath-python, the cuBLAS baseline, cuda-cccl (7 MB:
# `cuda.compute`, CUB's device sum for buffers kernels' `baseline = "cub_sum"`), pytest-xdist
# (the whole suite in one device command: experiments/gpu_session.sh tests), and any extra pip
# requirement given as an argument. Run it where a registry is reachable, from the project root;
# then, on the GPU host (README, "GPU host without a package registry"):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# --no-deps: the host must already have what nvmath-python needs (cuda-bindings, cuda-core,
# cuda-pathfinder, numpy); cuda-cccl needs the same (cuda-core with `cuda.core.Device`) and
# finds NVRTC, nvJitLink and the CUDA 13 runtime library through cuda-pathfinder (without them
# the cub_sum baseline falls back to the host's CuPy). PYTHON_VERSION picks another CPython
# (default 3.12).
#
# --notebook (before any extra requirement) also downloads what executing
# examples/seeds_story.ipynb with nbclient needs, about 6 MB: nbclient, nbformat, ipykernel and
# their dependencies, pinned to the versions it was executed with, less the optional ones
# (debugpy, jedi) and those the host's matplotlib brings (packaging, python-dateutil).
#
# --cluster (before any extra requirement; with --notebook or alone) also downloads Dask
# distributed for `harness run --cluster` (docs/multi-gpu.md), about
# 5 MB: dask, distributed and their dependencies, pinned to the versions it was tested with,
# less importlib_metadata (Python < 3.12 only) and packaging (the host's matplotlib brings it).
#
# --attention (before any extra requirement) also downloads nvidia-cudnn-frontend (12 MB), the
# attention kind's `cudnn_sdpa` baseline: cuDNN's SDPA through its Python graph API. It looks
# for libcudnn.so.9 under nvidia/cudnn/lib in its own site-packages, where a pip-installed
# PyTorch puts it, so install it into that environment (not yet tried on the GPU host).
set -euo pipefail
dest=${WHEEL_DIR:-.whl}
version=${PYTHON_VERSION:-3.12}
notebook=()
cluster=()
attention=()
while [[ ${1:-} == --notebook || ${1:-} == --cluster || ${1:-} == --attention ]]; do
  if [[ $1 == --attention ]]; then
    shift
    attention=(nvidia-cudnn-frontend==1.32.0)
    continue
  fi
  if [[ $1 == --cluster ]]; then
    shift
    cluster=(
      dask==2026.8.0 distributed==2026.8.0 click==8.4.0 cloudpickle==3.1.3 fsspec==2026.9.0
      partd==1.4.2 locket==1.0.0 toolz==1.2.0 pyyaml==6.0.3 jinja2==3.1.6 markupsafe==3.0.3
      msgpack==1.2.4 psutil==7.2.2 sortedcontainers==2.4.0 tblib==3.2.2 tornado==6.6.1
      zict==3.0.0
    )
    continue
  fi
  shift
  notebook=(
    nbclient==0.11.0 nbformat==5.11.1 fastjsonschema==2.22.3 jsonschema==4.26.0
    jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0
    typing_extensions==4.16.0 jupyter_client==8.10.0 jupyter_core==5.9.1 platformdirs==4.14.8
    traitlets==5.16.1 pyzmq==27.3.0 tornado==6.6.1 ipykernel==7.4.0 comm==0.2.3
    nest-asyncio2==1.7.4 matplotlib-inline==0.2.2 ipython==9.18.1
    ipython-pygments-lexers==1.1.1 pygments==2.21.0 prompt_toolkit==3.0.53 wcwidth==0.9.4
    pexpect==4.9.0 ptyprocess==0.7.0 stack_data==0.6.3 executing==2.3.0 asttokens==3.0.2
    pure_eval==0.2.4
  )
done
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$version" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dest" \
  "nvmath-python==1.0.*" cuda-cccl==1.2.1 pytest-xdist==3.8.0 execnet==2.1.2 \
  ${notebook[@]+"${notebook[@]}"} ${cluster[@]+"${cluster[@]}"} \
  ${attention[@]+"${attention[@]}"} "$@"
# the project's own wheel, for its metadata: the pytest11 entry point (the pytest plugin) and
# the `harness` command; gpu_session.sh keeps the checkout's code ahead of the wheel's copy
rm -f "$dest"/kernel_harness-*.whl
python3 -m pip wheel -q --no-deps -w "$dest" .
ls -la "$dest"
