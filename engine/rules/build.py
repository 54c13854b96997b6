"""A rule compiled into a :class:`~barsweep.engine.strategies.Strategy`.

:func:`compile_rule` parses and checks the rule's texts (:mod:`.parse`), makes its
indicator slots and the source of its signal (:mod:`.lower`), writes that source as a
module of its own named by the hash of its text, to ``BASE/barsweep_rules/`` (where
numba caches its functions as any module's: a rule compiled once on a machine loads
from disk in later processes), and imports it. The Strategy's sweep kernel and scan
are then made from that signal as for any strategy
(:mod:`barsweep.engine.strategies.kernels`). A Strategy compiled from a rule pickles as
its rule: a worker that never saw the spec compiles it (or loads it from its cache).
"""

from __future__ import annotations

import functools
import hashlib
import keyword
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ...errors import SpecError
from ..cache import BASE
from ..core.calendar import CALENDAR
from ..strategies import kernels
from ..strategies.base import Indicator, Param, Strategy
from .functions import ACCOUNT_STATE, FUNCTIONS, HELPERS, SERIES, STATE
from .lower import RUNTIME, columns_of, params_of, row, signal_source, slots, text, walk
from .parse import MAX_BARS, Node, parse_rule, usage

ENGINE_PACKAGE = __name__.rsplit(".", 2)[0]  # "barsweep.engine"

#: The four rules of a strategy, and which one each defaults to.
RULE_KEYS = ("entry", "exit", "short_entry", "short_exit")

MODULE = '''\
"""The signal of a barsweep rule, written by {writer}: do not edit.

{doc}
"""

from numba import njit

from {engine}.rules.runtime import {runtime}


@njit(cache={cache}, error_model="numpy")
def signal({args}):
{body}
'''


@dataclass(frozen=True)
class Rule:
    """A strategy written as rules: when to enter and exit, evaluated at each bar's close.

    ``short_entry`` defaults to the exit rule and ``short_exit`` to the entry rule; the
    execution's ``direction`` decides which are used. ``name`` names the strategy in
    the store and the report.

    Examples
    --------
    >>> rule = Rule("cross_above(ema(close, fast), ema(close, slow))",
    ...             "cross_below(ema(close, fast), ema(close, slow))", name="ema_rule")
    >>> strategy = compile_rule(rule, {"fast": "int", "slow": "int"})
    >>> [s.name for s in strategy.indicators]
    ['ema(close, fast)', 'ema(close, slow)']
    """

    entry: str
    exit: str
    short_entry: str | None = None
    short_exit: str | None = None
    name: str = "rule"

    @classmethod
    def of(cls, value: Rule | Mapping) -> Rule:
        """A Rule from a Rule or a mapping with its keys (``entry``, ``exit``, ...)."""
        if isinstance(value, Rule):
            return value
        unknown = sorted(set(value) - {*RULE_KEYS, "name"})
        missing = [k for k in ("entry", "exit") if value.get(k) is None]
        if unknown or missing:
            raise SpecError(f"a rule has the keys entry, exit (required), short_entry, "
                            f"short_exit, name; unknown {unknown}, missing {missing}")
        return cls(**{k: _text(v) if k in RULE_KEYS else v for k, v in value.items()
                      if v is not None})

    @property
    def texts(self) -> dict[str, str]:
        """The four rules' texts, the short ones defaulted."""
        return {"entry": self.entry, "exit": self.exit,
                "short_entry": self.short_entry or self.exit,
                "short_exit": self.short_exit or self.entry}

    def describe(self) -> str:
        given = [f"{k}: {getattr(self, k)}" for k in RULE_KEYS if getattr(self, k)]
        return "\n".join(given)

    def compile(self, kinds: Mapping[str, str]) -> Strategy:
        return compile_rule(self, kinds)


def _text(value) -> str:
    """A rule's text; YAML reads ``true``/``false`` as booleans."""
    if isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise SpecError(f"a rule is a text, got {type(value).__name__} {value!r}")
    return value


def parse_all(rule: Rule, kinds: Mapping[str, str], where: str = "rule",
              elsewhere: tuple[str, ...] = ()) -> dict[str, Node]:
    """The four rules' trees, keyed ``long_entry, long_exit, short_entry, short_exit``
    (``elsewhere``: as :func:`~.parse.parse_rule`'s)."""
    texts = rule.texts
    trees = {k: parse_rule(texts[k], kinds, f"{where}.{k}", elsewhere) for k in RULE_KEYS
             if k in ("entry", "exit") or getattr(rule, k)}
    trees.setdefault("short_entry", trees["exit"])
    trees.setdefault("short_exit", trees["entry"])
    return {"long_entry": trees["entry"], "long_exit": trees["exit"],
            "short_entry": trees["short_entry"], "short_exit": trees["short_exit"]}


def compile_rule(rule: Rule | Mapping, kinds: Mapping[str, str], where: str = "rule",
                 extra: tuple[str, ...] = ()) -> Strategy:
    """The Strategy that runs ``rule``.

    Parameters
    ----------
    rule : Rule or mapping
    kinds : mapping (or pairs) of parameter name to {"int", "float"}
        The parameters (grid axes) the rule may read, in the order of the strategy's
        parameters: an axis is an int parameter when every value is a whole number.
    where : str
        What the rule is, for messages (``strategy.rule``).
    extra : tuple of str
        Parameters of ``kinds`` the run applies itself (the stops, a portfolio's
        settings): not refused as unused, and named as such to a rule that reads one.

    Raises
    ------
    SpecError
        A :class:`~.parse.RuleError` with a caret for a rule outside the language; a
        parameter no rule uses; a parameter named as the language's own names
        (``grid.close: ... reserved for the series``, :func:`reserved_name`).
    """
    rule = Rule.of(rule)
    kinds = {k: ("int" if v == "int" else "float") for k, v in dict(kinds).items()
             if k not in extra}
    for name in kinds:
        reason = reserved_name(name)
        if reason:
            raise SpecError(f"grid.{name}: {reason}")
    return _compiled(rule, tuple(kinds.items()), where, tuple(extra))


def reserved_name(name: str) -> str | None:
    """Why a rule's parameter (a grid axis) cannot be called ``name``: the rule
    language's own name for a series, the position state, a function or a word; or None.

    >>> print(reserved_name("close"))  # doctest: +NORMALIZE_WHITESPACE
    the name 'close' is reserved for the series (open, high, low, close, volume, hour,
    minute, weekday, day, month): in a rule, close is the bars' close; give the grid axis
    another name, e.g. 'close_level'
    >>> reserved_name("fast") is None
    True
    """
    if name in SERIES:
        what, means = f"the series ({', '.join(SERIES)})", (
            f"is the {name} of the bar's time stamp (UTC)" if name in CALENDAR
            else f"is the bars' {name}")
    elif name in STATE:
        what, means = f"the state ({', '.join(STATE)})", "is read from the position and account"
    elif name in FUNCTIONS or name in HELPERS:
        what, means = "the rule language's functions", f"calls {usage(name)}"
    elif keyword.iskeyword(name):
        what, means = "the rule language's words", "is a word of the language"
    else:
        return None
    return (f"the name {name!r} is reserved for {what}: in a rule, {name} {means}; give "
            f"the grid axis another name, e.g. '{name}_level'")


@functools.cache
def _compiled(rule: Rule, kinds: tuple[tuple[str, str], ...], where: str,
              extra: tuple[str, ...] = ()) -> Strategy:
    params = dict(kinds)
    trees = parse_all(rule, params, where, extra)
    used = {n.value for tree in trees.values() for n in walk(tree) if n.kind == "param"}
    unused = [p for p in params if p not in used]
    if unused:
        raise SpecError(f"{where}: no rule uses the parameter{'s' * (len(unused) > 1)} "
                        f"{', '.join(map(repr, unused))}; use it in a rule or remove it "
                        "from the grid")
    order = [p for p in params if p in used]
    found = slots(trees)
    index = {text(slot): i for i, slot in enumerate(found)}
    body = signal_source(trees, index, {p: i for i, p in enumerate(order)})
    module = _module(trees, body)
    lags = _lag_params(trees)
    periods = _period_params(found)
    return Strategy(
        name=rule.name,
        params=tuple(Param(p, params[p], low=1 if p in periods else 0 if p in lags else None,
                           high=MAX_BARS if p in periods | lags else None)
                     for p in order),
        indicators=tuple(Indicator(text(slot), params_of(slot),
                                   program=functools.partial(_slot_row, slot))
                         for slot in found),
        signal=module.signal,
        doc=rule.describe(),
        rule=(rule, kinds),
    )


def columns_read(strategy: Strategy) -> frozenset[str]:
    """The bar columns a strategy compiled from a rule reads (``close``, ``volume``...);
    empty for a strategy written in Python.

    >>> from barsweep.engine.rules import Rule
    >>> sorted(columns_read(compile_rule(Rule("volume > sma(volume, n)", "close < 1"),
    ...                                  {"n": "int"})))
    ['close', 'volume']
    """
    if strategy.rule is None:
        return frozenset()
    rule, kinds = strategy.rule
    return columns_of(parse_all(rule, dict(kinds)))


def lookback(strategy: Strategy, params: Mapping[str, float]) -> int:
    """The most bars a rule of ``strategy`` reads back past its indicators' rows at
    ``params`` (one value per parameter): the lags (``x[k]``) and crosses (one bar)
    nested on a path from a rule's root to a series or an indicator; 0 for a strategy
    written in Python. A rule's first defined signal comes that many bars after its
    indicators' warm-up.

    >>> strategy = compile_rule(Rule("close[k] > sma(close, n)[2]", "cross_below(close, "
    ...                              "sma(close, n))"), {"n": "int", "k": "int"})
    >>> lookback(strategy, {"n": 20, "k": 30})
    30
    """
    if strategy.rule is None:
        return 0
    rule, kinds = strategy.rule

    def back(node: Node) -> int:
        if node.kind == "call":  # an indicator: its row's own warm-up counts it
            return 0
        own = 1 if node.kind == "cross" else 0
        if node.kind == "lag":
            k = node.args[1]
            own = int(params[k.value] if k.kind == "param" else k.value)
            return own + back(node.args[0])
        return own + max(map(back, node.args), default=0)

    return max(map(back, parse_all(rule, dict(kinds)).values()), default=0)


def _lag_params(trees: Mapping[str, Node]) -> set[str]:
    return {n.args[1].value for tree in trees.values() for n in walk(tree)
            if n.kind == "lag" and n.args[1].kind == "param"}


def _period_params(found: list[Node]) -> set[str]:
    """Parameters passed as an indicator's int argument (a period, >= 1)."""
    periods = set()
    for slot in found:
        for node in walk(slot):
            if node.kind != "call":
                continue
            function = FUNCTIONS[node.value[0]]
            scalars = node.args[len(function.series):]
            periods |= {a.value for a, (_, kind) in zip(scalars, function.scalars, strict=True)
                        if a.kind == "param" and kind == "int"}
    return periods


def _slot_row(slot: Node, columns: Mapping[str, np.ndarray], args: tuple,
              memo: dict) -> np.ndarray:
    """A slot's row for one tuple of its parameters' values (``Indicator.program``)."""
    return row(slot, columns, dict(zip(params_of(slot), args, strict=True)), memo)


def canonical(trees: Mapping[str, Node]) -> str:
    """The rules as the compiler read them: each key's canonical text (:func:`.lower.text`),
    built from the parsed trees, so it holds only the language's names, numbers and
    operators, never a character of the user's text (a comment, a quote, a backslash).

    >>> rule = Rule("close >  sma( close,n )", "close<sma(close,n)")
    >>> print(canonical(parse_all(rule, {"n": "int"})))
    long_entry: (close > sma(close, n))
    long_exit: (close < sma(close, n))
    short_entry: (close < sma(close, n))
    short_exit: (close > sma(close, n))
    """
    return "\n".join(f"{key}: {text(tree)}" for key, tree in trees.items())


def _module(trees: Mapping[str, Node], body: str) -> ModuleType:
    """The imported module holding the rule's ``signal`` (written once per rule): its
    source is made from the parsed trees only (:func:`canonical`, the emitted ``body``)."""
    doc = "\n".join(f"    {line}" for line in canonical(trees).splitlines())
    # the account's state only when read: the longest form costs the portfolio kernel
    # its flat-stretch search ahead of time
    reads_account = any(node.kind == "state" and node.value in ACCOUNT_STATE
                        for tree in trees.values() for node in walk(tree))
    args = (*kernels.SIGNAL_ARGS, *kernels.STATE_ARGS,
            *(kernels.ACCOUNT_ARGS if reads_account else ()))
    fields = dict(writer=__name__, doc=f"Rules:\n\n{doc}", engine=ENGINE_PACKAGE,
                  runtime=", ".join(RUNTIME), body=body, args=", ".join(args))
    source = MODULE.format(cache=True, **fields)
    stem = "rule_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"_barsweep_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    try:
        path = kernels.write_module(BASE / "barsweep_rules" / f"{stem}.py", source)
    except OSError as err:
        warnings.warn(f"cannot write the rule's module to {BASE / 'barsweep_rules'} ({err}):"
                      " it is compiled in every process, not cached", stacklevel=4)
        module = ModuleType(name)
        exec(compile(MODULE.format(cache=False, **fields), f"<rule {stem}>", "exec"),
             module.__dict__)
        return module
    return kernels.import_file(name, path)
