"""``benchmarks/gpu_check.sh --simulate``: the GPU machine's check, end to end, on a CPU.

The script runs its steps (probe, speed, check, pipeline, table) as it would on the GPU
machine, but in numba's CUDA simulator with tiny sizes and this interpreter's packages;
it must pass, print its table and leave its records in ``$OUT``. The report's verdict
and the sizing of the 10M-combo row are checked on their own, from records written here.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def gpu_check_module():
    """``benchmarks/gpu_check.py`` imported (its folder last on sys.path, so that its other
    scripts shadow nothing)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    import gpu_check

    return gpu_check


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_DISABLE_JIT", "PYTHONPATH")}
    env.update(PYTHON=sys.executable, OUT=str(out))
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--simulate"],
                          env=env, capture_output=True, text=True, timeout=300)
    return proc, out, time.perf_counter() - t0


def test_simulated_check_passes_and_prints_its_table(simulated):
    proc, out, _ = simulated
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    report = (out / "GPU_RESULTS.md").read_text()
    assert "Result: **PASS**" in report
    assert report in proc.stdout
    assert (out / "gpu_check.log").read_text() == proc.stdout  # the log is the output


def test_every_step_ran_and_left_its_rows(simulated):
    _, out, _ = simulated
    steps = {s["step"]: s["rc"] for s in read_jsonl(out / "steps.jsonl")}
    assert steps == {"probe": 0, "speed": 0, "check": 0, "pipeline": 0}
    rows = read_jsonl(out / "rows.jsonl")
    assert all(r["ok"] for r in rows)
    speed = [r["cells"] for r in rows if r["cells"][0] == "speed"]
    lockstep = [c for c in speed if c[1] == "ema_cross"]
    assert [c[3] for c in lockstep] == ["32", "64", "128"]
    assert all(c[9] == "PASS" and float(c[4]) > 0 for c in speed)
    # the own-pace kernel beside it at each size, with the same metrics
    own = [c for c in speed if c[1] == "ema_cross, own pace"]
    assert [c[3] for c in own] == ["32", "64", "128"]
    assert all(c[10] == "same metrics as lockstep" and c[9] == "PASS" for c in own)
    checked = [r["cells"][1] for r in rows if r["cells"][0] == "check"]
    # and three written as rules
    names = sorted([*builtin_names(), "rule_state", "rule_hold", "rule_account"])
    assert sorted(set(checked)) == names
    assert all(checked.count(name) == 2 for name in names)  # two executions
    (run,) = [r["cells"] for r in rows if r["cells"][0] == "barsweep run"]
    assert run[9] == "PASS" and "backend cuda" in run[10]
    facts = json.loads((out / "probe.json").read_text())
    assert facts["simulator"] == "1" and facts["tiny kernel ran right"] == "True"
    assert facts["import barsweep"].endswith(str(Path("src") / "barsweep"))  # the checkout


def builtin_names() -> list[str]:
    """The strategies a fresh process knows: the builtins (other tests register more in
    this one)."""
    code = ("import json; from barsweep.engine.strategies import strategy_names; "
            "print(json.dumps(strategy_names()))")
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                     text=True, check=True).stdout)


def run_table(out: Path, steps: list[dict], rows: list[dict]) -> int:
    """``gpu_check.py table`` on these records: its exit status."""
    (out / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return gpu_check_module().main(["table", "--out", str(out)])


def step(name: str, rc: int, advisory: bool = False) -> dict:
    return {"step": name, "rc": rc, "seconds": 1, "limit": 10, "note": "",
            "advisory": advisory}


def row(ok: bool) -> dict:
    return {"cells": ["check", "rsi", "close", "24", "", "", "", "", "0", "PASS" if ok
                      else "FAIL (1 values, 0 trade counts)", ""], "ok": ok}


@pytest.mark.parametrize("steps, rows, verdict", [
    ([step("probe", 0), step("speed", 0), step("pip-check", 1, advisory=True)], [row(True)],
     "PASS"),
    ([step("probe", 0), step("speed", 124)], [row(True)], "FAIL"),
    ([step("probe", 0), step("speed", 0)], [row(True), row(False)], "FAIL"),
    ([], [row(True)], "FAIL"),
    ([step("probe", 3), step("probe", 0), step("speed", 0)], [row(True)], "PASS"),
    ([step("probe", 0), step("probe", 3), step("speed", 0)], [row(True)], "FAIL"),
])
def test_the_report_fails_on_any_failed_step_or_row(tmp_path, steps, rows, verdict):
    rc = run_table(tmp_path, steps, rows)
    report = (tmp_path / "GPU_RESULTS.md").read_text()
    assert f"Result: **{verdict}**" in report
    assert rc == (0 if verdict == "PASS" else 1)
    if any(s["rc"] == 124 for s in steps):
        assert "| speed | timed out |" in report


def test_a_size_that_would_overrun_the_deadline_is_capped_or_dropped():
    fit_size = gpu_check_module().fit_size
    now = time.time()
    assert fit_size(10_000_000, None, now + 1) == (10_000_000, "")  # nothing to go by
    # 1M combos took 3 s: 10M are estimated at 1.3 * 30 + 5 = 44 s
    assert fit_size(10_000_000, (1_000_000, 3.0), now + 100) == (10_000_000, "")
    n, why = fit_size(10_000_000, (1_000_000, 3.0), now + 40)  # 30 s usable
    assert 6_000_000 <= n <= 7_000_000 and n % 100_000 == 0
    assert why.startswith("capped from 10,000,000: estimate 44 s > ")
    n, why = fit_size(10_000_000, (1_000_000, 3.0), now + 15)  # 5 s: under 2M would fit
    assert n == 0 and why.startswith("not run: estimate 44 s")
