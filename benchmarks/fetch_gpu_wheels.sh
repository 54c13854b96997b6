#!/usr/bin/env bash
# Download, on a machine with network, the wheels that benchmarks/gpu_check.sh carries to
# the GPU machine: the packages barsweep needs that its image lacks, one version each, for
# CPython 3.12 on x86-64 Linux. That image (Python 3.12, no network) already has numpy,
# numba, numba-cuda, a CUDA 13 toolkit, pandas, pyarrow, xarray, scipy, matplotlib, psutil,
# pyyaml, tqdm, jinja2, click, cloudpickle, fsspec, msgpack, toolz, sortedcontainers,
# packaging, typing-extensions, contourpy, narwhals and pillow: none of those is carried.
#
# Not carried: dask-cuda. Its release for that image's CUDA (25.10) pins numba-cuda<0.20,
# cuda-core 0.3 and, through rapids-dask-dependency, an older dask and distributed than
# barsweep's: a second version of each, shadowing the image's CUDA stack. gpu_check.sh
# runs `barsweep run` on a LocalCluster of one worker process with backend cuda instead
# (what LocalCUDACluster does for a machine of one GPU).
#
# The wheels go to an ignored folder (default benchmarks/gpu_wheels; the fallback ones to
# its fallback/), which a run on the GPU machine carries with the checkout; their total must stay within MAX_MIB (60), so
# that the checkout and the wheels fit the 64 MiB that travel. Versions are those the
# project's test environment runs.
#
#   benchmarks/fetch_gpu_wheels.sh [DEST]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$here/gpu_wheels}"
python="${PYTHON:-python3}"
max_mib="${MAX_MIB:-60}"

# name==version: what barsweep imports that the image lacks (dask, distributed, zarr,
# pydantic, bokeh, tornado), then what those need that the image lacks.
wheels=(
    dask==2026.8.0 distributed==2026.8.0 zarr==3.1.6 pydantic==2.14.4 bokeh==3.9.2
    tornado==6.6.1
    partd==1.4.2 locket==1.0.0 tblib==3.2.2 zict==3.0.0
    numcodecs==0.16.6 donfig==0.8.1.post1 google-crc32c==1.9.0
    pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
    xyzservices==2026.9.1
)

# Installed only if the carried packages do not import with the image's own (gpu_check.sh
# says so in one line): the newer typing-extensions that pydantic 2.14 asks for, which
# barsweep's engine imports.
fallback=(typing-extensions==4.16.0)

download() {  # download DEST NAME==VERSION...
    local to="$1"
    shift
    mkdir -p "$to"
    rm -f "$to"/*.whl
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$to" \
        --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_28_x86_64 --platform manylinux1_x86_64 "$@"
}
download "$dest" "${wheels[@]}"
download "$dest/fallback" "${fallback[@]}"

# one wheel per name, and every name present
names="$(for f in "$dest"/*.whl; do basename "$f" | cut -d- -f1 | tr 'A-Z_.' 'a-z--'; done)"
dupes="$(sort <<<"$names" | uniq -d)"
if [ -n "$dupes" ]; then
    echo "fetch_gpu_wheels: more than one wheel of: $dupes" >&2
    exit 1
fi
if [ "$(wc -l <<<"$names")" -ne "${#wheels[@]}" ]; then
    echo "fetch_gpu_wheels: ${#wheels[@]} packages asked for, $(wc -l <<<"$names") wheels" >&2
    exit 1
fi

bytes="$(cat "$dest"/*.whl "$dest"/fallback/*.whl | wc -c)"
mib="$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
ls -1s --block-size=K "$dest"/*.whl "$dest"/fallback/*.whl | sed "s|$dest/||"
echo "fetch_gpu_wheels: ${#wheels[@]} wheels and ${#fallback[@]} fallback, $mib MiB in" \
    "$dest (limit $max_mib MiB)"
if [ "$bytes" -gt $((max_mib * 1048576)) ]; then
    echo "fetch_gpu_wheels: over $max_mib MiB: carry less" >&2
    exit 1
fi
