"""Real runs for tests: synthetic bars written by the CLI, a spec file run by it."""

from pathlib import Path

import yaml

from barsweep.pipeline.cli import main


def synth(store: Path, n_bars: int, seed: int, symbol: str = "BTCUSDT") -> Path:
    """``barsweep data synth`` of ``n_bars`` hourly bars into ``store``."""
    assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars",
                 str(n_bars), "--seed", str(seed), "--store", str(store)]) == 0
    return store


def run_spec_file(spec: dict, path: Path, *flags: str) -> Path:
    """Write ``spec`` as YAML to ``path`` and ``barsweep run`` it (two local workers,
    quiet); returns its ``run.out``."""
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path), "--workers", "2", "--quiet", *flags]) == 0
    return Path(spec["run"]["out"])
