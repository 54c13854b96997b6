"""What the tests share, imported as ``from helpers.reference import ref_metrics``
(pytest puts ``tests/`` on ``sys.path``: ``pythonpath`` in pyproject.toml; a script of
tests/ run in a process of its own puts it there itself).

The references every fast path is held to, slow and obvious and sharing no code with the
engine: ``reference`` (one symbol), ``portfolio_reference``, ``rule_reference`` (a rule
read bar by bar), ``ref_strategies`` (the builtins' signals, TA-Lib's indicators) and
``rank_reference`` (whole-grid ranking). Inputs and cases: ``bars`` (random OHLC),
``portfolio_cases`` (the portfolio tests' symbols, strategies and executions),
``gpu_cases`` and ``gpu_portfolio_cases`` (the CUDA-vs-CPU cases). Checks and tools:
``compare`` (metrics held to a reference), ``runs`` (real runs through the CLI),
``processes`` (`dask` started by hand, a command under a memory cap), ``cuda_sim`` (a
script run in numba's CUDA simulator), ``ptx`` (PTX for sm_90 and ``ptxas``) and ``cdp``
(a headless Chromium).

A test module imports from here, never from another module of tests/ by its bare name
(``tests/test_layers.py`` refuses that); fixtures shared by a folder's tests are in its
``conftest.py``.
"""
