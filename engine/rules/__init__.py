"""Strategies written as rules, compiled into the sweep kernels.

A rule is a boolean expression over the bars, indicators, parameters and the position
state (``rsi(close, period) < lower and close > sma(close, trend)``), read by
:func:`~.parse.parse_rule` (``ast``, never ``eval``), made into indicator slots and a
generated signal by :mod:`.lower`, and compiled into a
:class:`~barsweep.engine.strategies.Strategy` by :func:`~.build.compile_rule`.
The language is documented in docs/RULES.md.
"""

from .build import RULE_KEYS, Rule, columns_read, compile_rule, lookback
from .builtins import BUILTIN_RULES
from .functions import FUNCTIONS, SERIES, STATE
from .parse import RuleError, parse_rule

__all__ = ["BUILTIN_RULES", "FUNCTIONS", "RULE_KEYS", "SERIES", "STATE", "Rule", "RuleError",
           "columns_read", "compile_rule", "lookback", "parse_rule"]
