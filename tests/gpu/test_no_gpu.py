"""Without a GPU (and without the simulator) the CUDA path refuses clearly."""

import numpy as np
import pytest

from barsweep.engine import Execution, get_strategy
from barsweep.engine.gpu import cuda_problem, sweep_cuda
from barsweep.errors import BackendError


@pytest.mark.skipif(cuda_problem() is None, reason="a CUDA GPU (or the simulator) is here")
def test_sweep_cuda_without_a_gpu_names_the_problem():
    close = np.linspace(100.0, 120.0, 50)
    bars = dict(open=close, high=close, low=close, close=close)
    with pytest.raises(BackendError, match="backend 'cuda': .*use backend 'cpu' or 'auto'"):
        sweep_cuda(get_strategy("ema_cross"), bars, dict(fast=np.array([3]),
                                                         slow=np.array([10])), Execution(), 252.0)


def test_a_strategy_without_its_signal_and_scan_is_refused_for_the_gpu():
    from dataclasses import replace

    from barsweep.engine.gpu import strategy_functions
    from barsweep.errors import SpecError

    bare = replace(get_strategy("ema_cross"), signal=None, scan=None)
    with pytest.raises(SpecError, match="Strategy\\(..., signal=signal, scan=scan\\)"):
        strategy_functions(bare)
    assert strategy_functions(get_strategy("ema_cross")) == (
        get_strategy("ema_cross").signal, get_strategy("ema_cross").scan)
