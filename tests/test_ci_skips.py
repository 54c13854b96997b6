"""Under CI=true a skip fails the run (tests/conftest.py): a broken install of an oracle
cannot pass as green. Checked on a throw-away test file run by a pytest of its own."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("body, word", [
    ("def test_one():\n    pytest.importorskip('no_such_oracle_xyz')\n", "failed"),
    ("pytest.importorskip('no_such_oracle_xyz')\n\ndef test_one():\n    pass\n", "error"),
])
def test_a_skip_fails_under_ci_only(tmp_path, body, word):
    probe = tmp_path / "test_probe.py"
    probe.write_text("import pytest\n\n" + body)

    def run(ci: str):
        env = {**os.environ, "CI": ci, "PYTHONPATH": str(TESTS)}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest",
                               "-p", "no:cacheprovider", "-o", "addopts=", str(probe)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)

    ci, dev = run("true"), run("")
    assert ci.returncode != 0 and f"1 {word}" in ci.stdout, ci.stdout
    assert "skipped under CI=true" in ci.stdout and "no_such_oracle_xyz" in ci.stdout
    assert dev.returncode in (0, 5) and "1 skipped" in dev.stdout, dev.stdout  # 5: none ran
