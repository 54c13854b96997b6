"""`rank` reads a results store given as any path, or the Dataset opened from it."""

from pathlib import Path

import pandas as pd

from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.run.results import open_results


def test_rank_takes_a_path_like_a_str(small_store):
    path, _ = small_store
    by_str = rank(str(path), by="sharpe", top=20)
    assert len(by_str) == 11
    pd.testing.assert_frame_equal(rank(Path(path), by="sharpe", top=20), by_str)
    pd.testing.assert_frame_equal(rank(open_results(Path(path)), by="sharpe", top=20), by_str)
