#!/usr/bin/env bash
# Download, on a machine with network, the wheels benchmarks/gpu_check.sh installs on the
# GPU machine (Python 3.12, x86_64 Linux, no network): dask, distributed, zarr, dask-cuda
# and barsweep's other dependencies, with theirs. numba and numba-cuda are already there.
#
#   benchmarks/fetch_gpu_wheels.sh [DEST]      # default: benchmarks/gpu_wheels
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$here/gpu_wheels}"
python="${PYTHON:-python3}"
mkdir -p "$dest"
"$python" -m pip download --dest "$dest" --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    dask-cuda distributed dask zarr xarray pyarrow pandas "pydantic>=2.6" pyyaml bokeh \
    setuptools wheel
du -sh "$dest"
