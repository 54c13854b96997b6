"""What the tests share, imported as ``from helpers.reference import ref_metrics``
(pytest puts ``tests/`` on ``sys.path``: ``pythonpath`` in pyproject.toml).

The references every fast path is held to, slow and obvious and sharing no code with the
engine: ``reference`` (one symbol), ``portfolio_reference``, ``rule_reference`` (a rule
read bar by bar), ``ref_strategies`` (the builtins' signals, TA-Lib's indicators) and
``rank_reference`` (whole-grid ranking). Inputs and checks: ``bars`` (random OHLC),
``compare`` (metrics held to a reference), ``runs`` (real runs through the CLI) and
``cdp`` (a headless Chromium); ``portfolio_cases`` (the portfolio tests' symbols,
strategies and executions).
"""
