#!/usr/bin/env bash
# GPU check: which CUDA toolkit numba-cuda uses, the ema_cross sweep timed at 100k, 1M
# and 10M combos on 26,280 bars, every builtin strategy on the GPU against the CPU, and
# `barsweep run` with backend cuda; one table, GPU_RESULTS.md, in $OUT (default
# gpu_check_out/ in the checkout) with the whole log (gpu_check.log) and each step's
# records. Details: gpu_check.py.
#
#   benchmarks/gpu_check.sh [--simulate] [--no-pipeline]
#
# Meant for a machine with an NVIDIA GPU whose python3 (PYTHON) has numpy, numba,
# numba-cuda, pandas, pyarrow and xarray but not dask, distributed, zarr, pydantic,
# bokeh or tornado, and no network: those come from the wheels in $WHEELS (default
# benchmarks/gpu_wheels, from benchmarks/fetch_gpu_wheels.sh), installed with
# `pip install --no-index --no-deps --target` into a scratch folder on PYTHONPATH;
# barsweep itself is the checkout, on PYTHONPATH too. Every step runs under `timeout`
# and within BUDGET_S seconds in all (default 470): a step that fails or runs out of
# time is one line in the table, and the next step still runs. If numba-cuda finds no
# working toolkit by itself, the probe is tried again with CUDA_HOME set to each of (at
# most two) toolkits on the machine that hold NVVM; if the carried packages do not all
# import with the image's own, the wheels in $WHEELS/fallback are added and it is tried
# once more.
#
# --simulate: the same steps on a CPU machine, in numba's CUDA simulator, with tiny sizes
# and PYTHON's own packages (no wheels); tests/gpu/test_gpu_check.py runs it.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
simulate=0
pipeline=1
for arg in "$@"; do
    case "$arg" in
        --simulate) simulate=1 ;;
        --no-pipeline) pipeline=0 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_check: unknown argument $arg" >&2; exit 2 ;;
    esac
done
out="${OUT:-$root/gpu_check_out}"
python="${PYTHON:-python3}"
wheels="${WHEELS:-$here/gpu_wheels}"
if [ "$simulate" = 1 ]; then
    export NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1
    budget="${BUDGET_S:-150}"
    sizes=(--bars 300 --slow0 20)
    speed_sizes=32,64,128 check_combos=24 pipe_combos=20 flag=--simulate
else
    unset NUMBA_ENABLE_CUDASIM NUMBA_DISABLE_JIT
    budget="${BUDGET_S:-470}"
    sizes=(--bars 26280 --slow0 502)
    speed_sizes=100000,1000000,10000000 check_combos=3000 pipe_combos=1000000 flag=""
fi
export PYTHONUNBUFFERED=1
mkdir -p "$out"
rm -f "$out"/rows.jsonl "$out"/steps.jsonl "$out"/probe.json "$out"/probe.env \
    "$out"/GPU_RESULTS.md

# record STEP RC SECONDS LIMIT NOTE [advisory]: one line of steps.jsonl
record() {
    printf '{"step": "%s", "rc": %d, "seconds": %d, "limit": %d, "note": "%s", "advisory": %s}\n' \
        "$1" "$2" "$3" "$4" "${5//\"/\'}" "${6:-false}" >>"$out/steps.jsonl"
}

# step NAME LIMIT COMMAND...: run COMMAND under `timeout`, within what is left of the
# budget (20 s kept for the table); GPU_CHECK_DEADLINE tells it when to wrap up
step() {
    local name="$1" want="$2"
    shift 2
    local left=$((budget - SECONDS - 20))
    local limit=$((want < left ? want : left))
    if [ "$limit" -lt 15 ]; then
        echo "== $name: not run, ${left} s of the budget left"
        record "$name" 125 0 0 "not run: ${left} s of the budget left" "${ADVISORY:-false}"
        return 125
    fi
    echo "== $name (limit $limit s): $*"
    local t0=$SECONDS rc
    GPU_CHECK_DEADLINE=$(($(date +%s) + limit - 8)) timeout -k 10 "$limit" "$@"
    rc=$?
    echo "== $name: exit $rc after $((SECONDS - t0)) s"
    record "$name" "$rc" $((SECONDS - t0)) "$limit" "${NOTE:-}" "${ADVISORY:-false}"
    return "$rc"
}

# skip NAME WHY: a step not run, as one line and one record
skip() {
    echo "== $1: not run: $2"
    record "$1" 125 0 0 "not run: $2"
}

main() {
    echo "gpu_check $flag: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -m), budget $budget s"
    local work site pip check=("$python" -u "$here/gpu_check.py")
    work="$(mktemp -d "${TMPDIR:-/tmp}/barsweep-gpu.XXXXXX")"
    site="$work/site"
    mkdir -p "$work/src" "$site"
    pip=("$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir
         --disable-pip-version-check --target "$site")
    ln -s "$root" "$work/src/barsweep"  # the checkout is the barsweep package
    cd "$work" || return 1

    if [ "$simulate" = 1 ]; then
        echo "== machine: simulated (NUMBA_ENABLE_CUDASIM=1), $("$python" --version 2>&1)"
        echo "== wheels: none (--simulate uses $python's packages)"
    else
        step machine 20 nvidia-smi \
            --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
            --format=csv
        if compgen -G "$wheels/*.whl" >/dev/null; then
            step wheels 90 "${pip[@]}" "$wheels"/*.whl \
                || step wheels-one-by-one 90 bash -c \
                    'for w in "${@:2}"; do $1 "$w" >/dev/null 2>&1 || bad="$bad ${w##*/}"; done
                     echo "gpu_check: the carried wheels install one by one, except:${bad:- none}"
                     [ -z "$bad" ]' _ "${pip[*]}" "$wheels"/*.whl
        else
            skip wheels "no wheels in $wheels (benchmarks/fetch_gpu_wheels.sh)"
        fi
    fi
    export PYTHONPATH="$work/src:$site${PYTHONPATH:+:$PYTHONPATH}"
    if [ "$simulate" = 0 ]; then
        ADVISORY=true step pip-check 30 "$python" -m pip check
    fi

    local CUDA_OK=0 CARRIED_OK=0 CANDIDATES=""
    step probe 90 "${check[@]}" probe --out "$out"
    [ -f "$out/probe.env" ] && . "$out/probe.env"
    if [ "$CUDA_OK" != 1 ] && [ "$simulate" = 0 ] && [ -z "${CUDA_HOME:-}" ]; then
        for home in $(printf '%s\n' $CANDIDATES | head -n 2); do
            echo "gpu_check: numba-cuda found no working toolkit by itself; CUDA_HOME=$home"
            CUDA_HOME="$home" NOTE="CUDA_HOME=$home" step probe 60 "${check[@]}" probe --out "$out"
            . "$out/probe.env"
            if [ "$CUDA_OK" = 1 ]; then
                export CUDA_HOME="$home"
                break
            fi
        done
    fi

    if [ "$CARRIED_OK" != 1 ] && [ "$simulate" = 0 ] && compgen -G "$wheels/fallback/*.whl" >/dev/null; then
        echo "gpu_check: the carried packages do not all import with the image's own;" \
            "adding the fallback wheels: $(cd "$wheels/fallback" && echo *.whl)"
        step wheels-fallback 60 "${pip[@]}" --upgrade "$wheels"/fallback/*.whl \
            && NOTE="with the fallback wheels" step probe 60 "${check[@]}" probe --out "$out"
        [ -f "$out/probe.env" ] && . "$out/probe.env"
    fi

    if [ "$CUDA_OK" = 1 ]; then
        step speed 150 "${check[@]}" speed --out "$out" "${sizes[@]}" --sizes "$speed_sizes"
        step check 150 "${check[@]}" check --out "$out" "${sizes[@]}" --combos "$check_combos"
    else
        skip speed "CUDA does not work here (see the probe)"
        skip check "CUDA does not work here (see the probe)"
    fi
    if [ "$pipeline" = 0 ]; then
        echo "== pipeline: not run (--no-pipeline)"
    elif [ "$CUDA_OK" != 1 ]; then
        skip pipeline "CUDA does not work here (see the probe)"
    elif [ "$CARRIED_OK" != 1 ]; then
        skip pipeline "the carried packages do not all import (see the probe)"
    else
        step pipeline 90 "${check[@]}" pipeline --out "$out" "${sizes[@]}" \
            --combos "$pipe_combos"
    fi

    echo "== table"
    timeout -k 5 30 "${check[@]}" table --out "$out" "${sizes[@]}" --mode-flag="$flag"
    local rc=$?
    cd / && rm -rf "$work"
    echo "gpu_check: exit $rc, $SECONDS s in all"
    return "$rc"
}

main 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
