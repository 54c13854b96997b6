"""barsweep.engine.gpu: the CUDA kernels (numba.cuda, imported with this package: the
engine imports it only where CUDA is asked for). sweep (sweep_cuda: a block of combos on
one symbol), hoist (the indicators on the device), portfolio (a portfolio block)."""

from .hoist import device_indicators
from .portfolio import portfolio_cuda_problem, run_portfolio_cuda
from .sweep import cuda_problem, require_cuda, sweep_cuda

__all__ = ["cuda_problem", "device_indicators", "portfolio_cuda_problem", "require_cuda",
           "run_portfolio_cuda", "sweep_cuda"]
