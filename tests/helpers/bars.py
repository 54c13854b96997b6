"""Small random bars for tests: valid OHLC, positive, seeded."""

from __future__ import annotations

import numpy as np


def random_bars(n_bars: int, seed: int, gap: float = 0.002) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n_bars)))
    prev = np.concatenate([[100.0], close[:-1]])
    open_ = prev * np.exp(rng.normal(0.0, gap, n_bars))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.004, n_bars)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.004, n_bars)))
    time = np.datetime64("2020-01-01T00:00", "ns") + np.arange(n_bars) * np.timedelta64(1, "h")
    funding = np.where(np.arange(n_bars) % 8 == 0, rng.normal(1e-4, 2e-4, n_bars), 0.0)
    return dict(open=open_, high=high, low=low, close=close, time=time.view(np.int64),
                funding_rate=funding)
