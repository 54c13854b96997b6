#!/usr/bin/env bash
# GPU check on a machine with an NVIDIA GPU (an H200 in our runs): CUDA results against
# the CPU for every strategy, the ema_cross sweep timed at 100k, 1M and 10M combos on
# 26,280 bars, and `barsweep run` on dask-cuda's LocalCUDACluster; one table, also
# written to $OUT/GPU_RESULTS.md (default: the checkout's root). Details: gpu_check.py.
#
# That machine has Python 3.12 with numba and numba-cuda, but not dask, distributed,
# zarr or dask-cuda, and no network: they (and anything else barsweep needs that is
# missing) are installed from the wheels in $WHEELS (default benchmarks/gpu_wheels,
# filled beforehand by benchmarks/fetch_gpu_wheels.sh) into a venv that sees the
# system's packages.
#
#   benchmarks/gpu_check.sh [--no-pipeline]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
wheels="${WHEELS:-$here/gpu_wheels}"
python="${PYTHON:-python3}"
venv="${VENV:-${TMPDIR:-/tmp}/barsweep-gpu-venv}"
out="${OUT:-$root}"
if [ ! -d "$wheels" ]; then
    echo "gpu_check: no wheels at $wheels; run benchmarks/fetch_gpu_wheels.sh first" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$python" -m venv --system-site-packages "$venv"
pip=("$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels")
"${pip[@]}" setuptools wheel
"${pip[@]}" dask distributed zarr dask-cuda xarray pyarrow pandas "pydantic>=2.6" pyyaml bokeh
"${pip[@]}" --no-deps --no-build-isolation "$root"
cd "$venv"  # import the installed barsweep, not the checkout's top-level folders
"$venv/bin/python" "$here/gpu_check.py" --out "$out/GPU_RESULTS.md" "$@"
