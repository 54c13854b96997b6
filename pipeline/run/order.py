"""The order of ranked combos, best first: one rule for ``rank`` and a search's
promotions."""

from __future__ import annotations

import numpy as np


def rank_order(score: np.ndarray, ascending: bool, idle_wins: bool, ruined: np.ndarray,
               traded: np.ndarray) -> np.ndarray:
    """The order of candidates, best first (a permutation of their positions).

    Parameters
    ----------
    score : ndarray, shape (n,), float64, no NaN
        The ranked metric of each candidate.
    ascending : bool
        Whether a smaller score ranks first.
    idle_wins : bool
        Whether a combo that never traded would win by doing nothing (volatility 0, ...):
        such combos then rank after every combo that traded.
    ruined, traded : ndarray, shape (n,), bool

    Ruined combos rank after every other, infinite scores after every finite one
    (within those groups); ties keep the candidates' order.
    """
    signed = score if ascending else -score
    idle = ~traded if idle_wins else np.zeros(len(score), dtype=bool)
    # np.lexsort: the last key is the primary one
    return np.lexsort((np.arange(len(score)), signed, np.isinf(score), idle, ruined))
