"""The functions a rule may call: the engine's indicators under TA-Lib's names and
argument orders, and the per-bar helpers (``abs min max cross_above cross_below``).

An indicator takes its series first (any numeric expression of the bars), then its
scalar arguments (int periods, float multipliers), in the order of TA-Lib's Python
function; a multi-output one is read through an attribute (``bbands(close, 20, 2).lower``).
Each output is one entry of :data:`barsweep.engine.indicators.registry.INDICATORS`, computed by
its kernel (the same numbers as a builtin strategy's).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.calendar import CALENDAR

#: The bar columns a rule reads by name, and the calendar of their time stamps (UTC:
#: :mod:`barsweep.engine.core.calendar`).
SERIES = ("open", "high", "low", "close", "volume", *CALENDAR)

#: The account's state a rule reads by name: its equity at the close and the entry order
#: pending then (its side and level). A rule reading any of them compiles to an
#: 11-argument signal (:mod:`barsweep.engine.strategies.kernels`).
ACCOUNT_STATE = ("equity", "pending", "pending_price")

#: The position and account state a rule reads by name (not lagged, not inside an
#: indicator).
STATE = ("position", "entry_price", "bars_held", "quantity", *ACCOUNT_STATE)

#: Per-bar helpers: name -> (fewest, most) arguments.
HELPERS = {"abs": (1, 1), "min": (2, 8), "max": (2, 8), "cross_above": (2, 2),
           "cross_below": (2, 2)}


@dataclass(frozen=True)
class Function:
    """An indicator a rule can call.

    Attributes
    ----------
    series : tuple of str
        Its series arguments, in order (``("x",)``, or ``("high", "low", "close")``).
    scalars : tuple of (name, kind)
        Its scalar arguments after the series, kind ``"int"`` (a period: an integer
        literal or an int parameter, >= 1) or ``"float"``.
    outputs : dict of str to str
        Output name -> key of ``INDICATORS``; one entry named ``""`` for a
        single-output indicator.
    talib : str
        The TA-Lib call it equals, for the docs.
    """

    series: tuple[str, ...]
    scalars: tuple[tuple[str, str], ...]
    outputs: dict[str, str]
    talib: str

    @property
    def arity(self) -> int:
        return len(self.series) + len(self.scalars)

    def usage(self, name: str) -> str:
        """``bbands(x, timeperiod, nbdev).upper|middle|lower``"""
        args = ", ".join((*self.series, *(n for n, _ in self.scalars)))
        outs = "|".join(o for o in self.outputs if o)
        return f"{name}({args})" + (f".{outs}" if outs else "")


def _one(key: str, talib: str, *scalars: tuple[str, str], series=("x",)) -> Function:
    return Function(tuple(series), scalars, {"": key}, talib)


_PERIOD = ("timeperiod", "int")
_HLC = ("high", "low", "close")

FUNCTIONS: dict[str, Function] = {
    "sma": _one("sma", "SMA(x, timeperiod)", _PERIOD),
    "ema": _one("ema", "EMA(x, timeperiod)", _PERIOD),
    "wma": _one("wma", "WMA(x, timeperiod)", _PERIOD),
    "rsi": _one("rsi", "RSI(x, timeperiod)", _PERIOD),
    "roc": _one("roc", "ROC(x, timeperiod)", _PERIOD),
    "trix": _one("trix", "TRIX(x, timeperiod)", _PERIOD),
    "stdev": _one("stdev", "STDDEV(x, timeperiod, nbdev=1)", _PERIOD),
    "highest": _one("highest", "MAX(x, timeperiod)", _PERIOD),
    "lowest": _one("lowest", "MIN(x, timeperiod)", _PERIOD),
    "atr": _one("atr", "ATR(high, low, close, timeperiod)", _PERIOD, series=_HLC),
    "bbands": Function(("x",), (_PERIOD, ("nbdev", "float")),
                       {"upper": "bb_upper", "middle": "bb_middle", "lower": "bb_lower"},
                       "BBANDS(x, timeperiod, nbdevup=nbdev, nbdevdn=nbdev, matype=0)"),
    "macd": Function(("x",), (("fastperiod", "int"), ("slowperiod", "int"),
                              ("signalperiod", "int")),
                     {"macd": "macd_line", "signal": "macd_signal", "hist": "macd_hist"},
                     "MACD(x, fastperiod, slowperiod, signalperiod)"),
    "stoch": Function(_HLC, (("fastk_period", "int"), ("slowk_period", "int"),
                             ("slowd_period", "int")),
                      {"k": "stoch_k", "d": "stoch_d"},
                      "STOCH(high, low, close, fastk_period, slowk_period, 0, slowd_period, 0)"),
    "donchian": Function(("high", "low"), (_PERIOD,),
                         {"upper": "donchian_upper", "lower": "donchian_lower"},
                         "(MAX(high, timeperiod), MIN(low, timeperiod))"),
}


def known_names() -> tuple[str, ...]:
    """Every name a rule may use besides its parameters (for suggestions)."""
    return (*SERIES, *STATE, *FUNCTIONS, *HELPERS)
