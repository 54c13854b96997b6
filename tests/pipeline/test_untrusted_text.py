"""Nothing in a spec or a store runs as code (docs/SECURITY.md): a rule's text never
reaches generated source, a store's modules are imported only when the reader asks
(and only the files its run hashed), and a rule too big or too deep for the compiler is
refused in one line. Each attack is made for real: a payload that writes a file, a
store edited on disk, a module file swapped after the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import zarr
from helpers.runs import synth

from barsweep.engine.rules import Rule, RuleError, compile_rule, parse_rule
from barsweep.engine.rules.parse import MAX_BARS, MAX_CHARS, MAX_DEPTH, MAX_NODES
from barsweep.pipeline.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "engine" / "custom_strategy_example.py"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def payload(marker: Path) -> str:
    """Python that creates ``marker`` when it runs."""
    return f'import os;open({str(marker)!r},"w").write("x")'


def barsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *args], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=600)


def one_line(stderr: str) -> str:
    """The error line of a refusal (a rule's refusal adds its text and a caret)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("barsweep: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ------------------------------------------------------------------ rule text, compiled


def test_a_comment_in_a_rule_cannot_close_the_generated_docstring(tmp_path):
    """The review's reproduction: a ``#`` comment holding three quotes and a payload."""
    marker = tmp_path / "PWN"
    synth(tmp_path / "bars", 300, seed=1)
    entry = f'close > sma(close, n)  # """;{payload(marker)};"""'
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": {"name": "hostile", "rule": {"entry": entry,
                                                "exit": "close < sma(close, n)"}},
        "grid": {"n": [5, 10]}}))
    done = barsweep("check", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "comments are not part of the rule language" in one_line(done.stderr)
    assert not marker.exists()


@pytest.mark.parametrize("text, said", [
    ("close > 1 \\\n and close < 2", "a backslash is not part of the rule language"),
    ("close > sma(close, n) # note", "comments are not part of the rule language"),
    ("close > caf\u00e9", "U+00E9"),
    ("close > 1\x1b[2J", "U+001B"),
])
def test_characters_outside_the_language_are_refused_with_a_caret(text, said):
    with pytest.raises(RuleError) as refused:
        parse_rule(text, {"n": "int"}, "strategy.rule.entry")
    message = str(refused.value)
    assert said in message and message.splitlines()[-1].strip().startswith("^")


def test_the_generated_module_is_made_from_the_tree_alone():
    """No character of the user's text reaches the module: two spellings of one rule
    (spacing, redundant parentheses, 1 and 1.0) compile to one module file, whose source
    holds only the canonical text."""
    first = compile_rule(Rule("close>sma( close ,n)and((open<1.0))", "close<sma(close,n)"),
                         {"n": "int"})
    second = compile_rule(Rule("close > sma(close, n) and open < 1",
                               "close < sma(close, n)"), {"n": "int"})
    assert first.signal.py_func.__module__ == second.signal.py_func.__module__
    source = Path(first.signal.py_func.__code__.co_filename).read_text()
    assert "long_entry: ((close > sma(close, n)) and (open < 1))" in source
    assert "sma( close ,n)" not in source and "((open" not in source


@pytest.mark.parametrize("text, said", [
    (" + ".join(["close"] * 3_000) + " > 1", f"at most {MAX_CHARS:,} characters"),
    ("not " * 1_200 + "close > 1", f"at most {MAX_CHARS:,} characters"),
    ("not " * (MAX_DEPTH + 5) + "close > 1", f"at most {MAX_DEPTH} levels"),
    (" and ".join(["open>1"] * 200), f"at most {MAX_NODES} terms"),
    ("(" * 300 + "close" + ")" * 300 + " > 1", "too many nested parentheses"),
    ("abs(" * 150 + "close" + ")" * 150 + " > 1", "nested too deeply"),
    ("close > sma(close, 100000000000000000000)", f"a period of at most {MAX_BARS:,} bars"),
    ("close[100000000000000000000] > 1", f"a lag is at most {MAX_BARS:,} bars"),
    ("close > 1e309", "beyond float64's range"),
    ("close > -1e309", "beyond float64's range"),
    ("close > " + "9" * 400, "beyond float64's range"),
])
def test_rules_past_the_limits_are_one_refusal(text, said):
    """Length, depth, periods, lags and literals are bounded before anything recurses or
    compiles: a RuleError saying the limit, never RecursionError, a numba TypingError or
    a NameError from the generated file."""
    with pytest.raises(RuleError) as refused:
        compile_rule(Rule(text, "close < 1"), {})
    assert said in str(refused.value)
    assert str(refused.value).startswith("rule.entry: ")


def test_a_rule_at_the_limits_still_compiles():
    deep = "not " * (MAX_DEPTH - 10) + "(close > n)"
    wide = " + ".join(["close[1]"] * (MAX_DEPTH - 20)) + " > n"
    many = " and ".join(["open > 1"] * (MAX_NODES // 4))
    for text in (deep, wide, f"{many} and close > n"):
        assert compile_rule(Rule(text, "close < n"), {"n": "int"}).signal is not None


# ------------------------------------------------------------------ stores and modules


def user_project(root: Path) -> Path:
    """A project with bars, the package ``mine`` registering ``sma_trend`` and a spec
    naming it, run with two local workers into ``results.zarr``."""
    project = root / "project"
    (project / "mine").mkdir(parents=True)
    (project / "mine" / "__init__.py").write_text("")
    (project / "mine" / "trend.py").write_text(EXAMPLE.read_text())
    synth(project / "bars", 600, seed=3)
    (project / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "modules": ["mine.trend"], "strategy": "sma_trend",
        "grid": {"period": [5, 10, 20]}, "run": {"out": "results.zarr"}}))
    done = barsweep("run", "spec.yaml", "--cluster", "threads", "--quiet", cwd=project)
    assert done.returncode == 0, done.stderr
    return project


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return user_project(tmp_path_factory.mktemp("modules"))


def test_the_run_records_the_digest_of_its_modules(project):
    attrs = zarr.open_group(project / "results.zarr", mode="r").attrs
    recorded = json.loads(attrs["modules_sha256"])
    assert list(recorded) == ["mine.trend"] and len(recorded["mine.trend"]) == 64


def test_reading_a_store_imports_nothing_it_names(project, tmp_path):
    """A module swapped for a payload after the run: ``rank`` reads the store without it,
    the views that rebuild a combo refuse in one line naming ``--import-modules``, and
    with it refuse the files the run did not hash. The payload never runs."""
    marker = tmp_path / "PWN"
    module = project / "mine" / "trend.py"
    original = module.read_text()
    module.write_text(f"{payload(marker)}\n{original}")
    try:
        ranked = barsweep("rank", "results.zarr", "--top", "3", cwd=project)
        assert ranked.returncode == 0, ranked.stderr
        assert "sma_trend" not in ranked.stderr and "period" in ranked.stdout
        best = barsweep("plot", "best", "results.zarr", "--out", str(tmp_path / "b.png"),
                        cwd=project)
        assert best.returncode == 2 and "--import-modules" in one_line(best.stderr)
        trades = barsweep("trades", "results.zarr", "--rank", "1", "--import-modules",
                          cwd=project)
        assert trades.returncode == 2
        assert "'mine.trend'" in one_line(trades.stderr)
        assert "is not the one the run" in trades.stderr
        assert not marker.exists() and not (tmp_path / "b.png").exists()
    finally:
        module.write_text(original)
    asked = barsweep("plot", "best", "results.zarr", "--import-modules", "--out",
                     str(tmp_path / "b.png"), cwd=project)
    assert asked.returncode == 0, asked.stderr
    assert (tmp_path / "b.png").stat().st_size > 0


def test_a_store_edited_to_name_other_modules_imports_none(project, tmp_path):
    """The stored spec rewritten to name a module of the attacker's folder (``module_dir``
    and ``modules``): neither ``rank`` nor ``plot best --import-modules`` imports it."""
    marker = tmp_path / "PWN"
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "owned.py").write_text(payload(marker) + "\n")
    copy = tmp_path / "results.zarr"
    subprocess.run(["cp", "-r", str(project / "results.zarr"), str(copy)], check=True)
    group = zarr.open_group(copy, mode="r+")
    spec = yaml.safe_load(group.attrs["spec"])
    spec.update(module_dir=str(evil), modules=["owned"])
    group.attrs["spec"] = yaml.safe_dump(spec)
    ranked = barsweep("rank", str(copy), "--top", "2", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    asked = barsweep("plot", "best", str(copy), "--import-modules", "--out",
                     str(tmp_path / "b.png"), cwd=tmp_path)
    assert asked.returncode == 2 and "'owned'" in one_line(asked.stderr)
    assert not marker.exists()


def test_import_modules_imports_only_a_module_dirs_own_modules(project, tmp_path):
    """A stored spec naming an installed module (``this``) that ``module_dir`` does not
    hold, with a digest of null recorded: refused, not imported from sys.path."""
    copy = tmp_path / "results.zarr"
    subprocess.run(["cp", "-r", str(project / "results.zarr"), str(copy)], check=True)
    group = zarr.open_group(copy, mode="r+")
    spec = yaml.safe_load(group.attrs["spec"])
    spec.update(module_dir=str(tmp_path / "nowhere"), modules=["this"])
    group.attrs["spec"] = yaml.safe_dump(spec)
    group.attrs["modules_sha256"] = json.dumps({"this": None})
    asked = barsweep("trades", str(copy), "--rank", "1", "--import-modules", cwd=tmp_path)
    assert asked.returncode == 2 and "holds no package or file" in one_line(asked.stderr)
    assert "Zen of Python" not in asked.stdout


def test_a_store_carrying_a_hostile_rule_runs_nothing_when_read(tmp_path):
    """A rule store whose stored spec was given the comment payload: every reader (rank,
    trades, report, plot best) reads or refuses it, and the payload never runs."""
    marker = tmp_path / "PWN"
    synth(tmp_path / "bars", 400, seed=2)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": {"name": "r", "rule": {"entry": "close > sma(close, n)",
                                          "exit": "close < sma(close, n)"}},
        "grid": {"n": [5, 10]}, "run": {"out": "results.zarr"}}))
    assert main(["run", str(tmp_path / "spec.yaml"), "--cluster", "threads", "--quiet"]) == 0
    group = zarr.open_group(tmp_path / "results.zarr", mode="r+")
    spec = yaml.safe_load(group.attrs["spec"])
    spec["strategy"]["rule"]["entry"] += f'  # """;{payload(marker)};"""'
    group.attrs["spec"] = yaml.safe_dump(spec)
    ranked = barsweep("rank", "results.zarr", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    for view in (["trades", "results.zarr", "--rank", "1"],
                 ["report", "results.zarr", "--out", str(tmp_path / "r.html")],
                 ["plot", "best", "results.zarr", "--out", str(tmp_path / "b.png")]):
        done = barsweep(*view, cwd=tmp_path)
        assert done.returncode == 2, (view, done.stderr)
        assert "comments are not part of the rule language" in done.stderr
    assert not marker.exists()
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "b.png").exists()
