"""The sweep spec: one YAML file that describes a run, validated before anything runs.

:func:`load_spec` and :func:`parse_spec` read a spec into a frozen :class:`Spec`, refusing
unknown keys, wrong types and impossible values with ONE :class:`SpecError` that names
the file and every failing key as a dotted path (``execution.fees``, ``grid.fast``,
``constraints[0]``). The grid is checked against the strategy's declared parameters,
and its size against ``run.max_combos`` (counted from the axes, never enumerated); it is
built once, while the spec is validated, and :attr:`Spec.param_grid` holds it.

The models are here; the YAML and paths in :mod:`~barsweep.pipeline.config.files`, the
``cluster`` section in :mod:`~barsweep.pipeline.config.cluster`, the execution settings
in :class:`barsweep.engine.Execution`, the grid entries in :mod:`~barsweep.pipeline.config.axes`,
and how refusals read in :func:`barsweep.errors.refusals`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ...engine.core import (
    EXECUTION_AXES,
    ORDER_AXES,
    RISK_WITHOUT_STOP,
    STOP_PARAMS,
    WHOLE_AXES,
    Execution,
    check_stop,
    leverage_column,
    order_columns,
    size_column,
)
from ...engine.rules import Rule, compile_rule
from ...engine.strategies import (
    Strategy,
    get_strategy,
    import_strategy_module,
    imported_from,
    strategy_names,
)
from ...errors import Problems, SpecError, refusals
from .axes import AXIS, AXIS_TAGS, RangeSpec, as_kind, expand
from .cluster import SECURITY_TAGS, STARTED_HERE, ClusterSpec
from .expr import check_names, parse_expr
from .files import PathStr, dump_yaml, load_yaml, merged, resolve_paths
from .grid import Grid
from .portfolio import PORTFOLIO_AXES, PortfolioSpec, portfolio_axis_problems, portfolio_problems
from .search import SearchSpec, too_big_search, unused_key_problem
from .sections import MAX_COMBOS, SECTION_CONFIG, AnalysisSpec, DataSpec, RuleSpec, RunSpec
from .windows import WalkForwardSpec, bars_of

__all__ = [
    "MAX_COMBOS",
    "AnalysisSpec",
    "ClusterSpec",
    "DataSpec",
    "RangeSpec",
    "RuleSpec",
    "RunSpec",
    "Spec",
    "load_spec",
    "parse_spec",
]


class Spec(BaseModel):
    """A whole sweep: data, strategy, grid, constraints, execution, run and cluster.

    Attributes
    ----------
    grid : dict of str to list or RangeSpec
        One entry per strategy parameter, in the order the strategy declares them, with
        int values for int parameters and floats for the others.
    constraints : list of str
        Expressions over the parameter names (see :mod:`barsweep.pipeline.config.expr`).
    cluster : ClusterSpec
        Where the blocks run; the spec may say just ``local``, ``cuda``, ``slurm``,
        ``pbs`` or a scheduler address such as ``tcp://host:8786``.
    n_workers : int or None
        Workers of a cluster barsweep starts (local or cuda); refused with an address.
    modules : list of str
        Modules to import, which register custom strategies (``my_strategies.sma_trend``).
    module_dir : str or None
        Where ``modules`` are looked for first (a package folder or a ``.py`` file of
        their top-level name): by default the spec file's folder (:func:`load_spec`), or
        the current directory for a spec given as a mapping. A run ships the modules it
        finds there to workers that do not have them.

    Examples
    --------
    >>> spec = parse_spec({"data": {"store": "bars/", "symbols": "BTCUSDT", "timeframe": "1h"},
    ...                    "strategy": "ema_cross",
    ...                    "grid": {"fast": [5, 10], "slow": {"start": 20, "stop": 40, "step": 10}},
    ...                    "constraints": ["fast < slow"]})
    >>> spec.param_grid.shape
    (2, 3)
    """

    model_config = SECTION_CONFIG

    data: DataSpec
    module_dir: PathStr | None = None
    modules: list[str] = Field(default_factory=list)
    strategy: Annotated[Annotated[str, Tag("named")] | Annotated[RuleSpec, Tag("rules")],
                        Discriminator(lambda v: "named" if isinstance(v, str) else "rules")]
    portfolio: PortfolioSpec | None = None
    grid: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    constraints: list[str] = Field(default_factory=list)
    execution: Execution = Field(default_factory=Execution)
    analysis: AnalysisSpec = Field(default_factory=AnalysisSpec)
    walk_forward: WalkForwardSpec | None = None
    search: SearchSpec = Field(default_factory=SearchSpec)
    run: RunSpec = Field(default_factory=RunSpec)
    cluster: ClusterSpec = Field(default_factory=lambda: ClusterSpec())
    n_workers: int | None = Field(None, gt=0, strict=True)
    _grid: Grid | None = PrivateAttr(None)
    _strategy: Strategy | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, value: Any) -> Any:
        """A section left empty in YAML (``grid:``) means its default."""
        if isinstance(value, Mapping):
            optional = ("grid", "constraints", "execution", "analysis", "walk_forward", "run")
            return {k: v for k, v in value.items() if not (k in optional and v is None)}
        return value

    @model_validator(mode="before")
    @classmethod
    def _modules_here(cls, value: Any) -> Any:
        """``modules`` without ``module_dir`` are looked for in the current directory
        first, as a relative path is (:func:`load_spec` gives the spec file's)."""
        if isinstance(value, Mapping) and value.get("modules") and (
                value.get("module_dir") is None):
            return {**value, "module_dir": os.getcwd()}
        return value

    @field_validator("modules")
    @classmethod
    def _import_modules(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Import the modules that register custom strategies (before ``strategy``),
        from ``module_dir`` when it holds them."""
        problems = []
        root = info.data.get("module_dir")
        importing = not isinstance(info.context, dict) or info.context.get("modules", True)
        for i, name in enumerate(value):
            try:
                if importing:
                    import_strategy_module(name, root)
                elif not imported_from(name, root):
                    raise SpecError(f"{name!r} is not imported: a results store's modules "
                                    "are code, imported only when asked (--import-modules, "
                                    "checked against the files its run hashed)")
            except SpecError as err:
                problems.append((f"modules[{i}]", str(err)))
        if problems:
            raise Problems(problems)
        return value

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str | RuleSpec) -> str | RuleSpec:
        if isinstance(value, str):
            get_strategy(value)
        elif value.name in strategy_names():
            raise SpecError(f"the rule's name {value.name!r} is a registered strategy's; "
                            f"name it otherwise (strategy.name)")
        return value

    @field_validator("grid")
    @classmethod
    def _grid_fits_strategy(cls, value: dict, info: ValidationInfo) -> dict:
        """Check the axes' values against the strategy's parameters; the expanded axes
        are kept in the validation context for :meth:`_whole_spec` to build the grid."""
        problems = []
        expanded = {}
        for key, entry in value.items():
            try:
                value[key] = AXIS.validate_python(entry)
                expanded[key] = expand(value[key])
            except ValidationError as err:
                problems += [tuple(line.split(": ", 1)) for line in
                             refusals(err, RangeSpec, f"grid.{key}", skip=AXIS_TAGS)]
            except SpecError as err:
                problems.append((f"grid.{key}", str(err)))
        problems += portfolio_axis_problems(expanded, info.data.get("portfolio"))
        own = {k: v for k, v in expanded.items() if k not in PORTFOLIO_AXES}
        strategy = _strategy_or_none(info)
        if isinstance(info.data.get("strategy"), RuleSpec) and not problems:
            strategy, problems = _rule_strategy(info.data["strategy"], expanded)
            if isinstance(info.context, dict):
                info.context["strategy"] = strategy
        if strategy is not None:
            problems += _strategy_problems(strategy, own, given=value.keys())
        if problems:
            raise Problems(problems)
        if strategy is None:
            return value
        kinds = {p.name: _kind(p.kind) for p in strategy.params} | dict.fromkeys(
            (k for k in EXECUTION_AXES if k in value and k not in WHOLE_AXES), "float") | {
            k: "int" for k in WHOLE_AXES if k in value} | dict.fromkeys(
            (k for k in PORTFOLIO_AXES if k in value), "int")
        if isinstance(info.context, dict):
            info.context["axes"] = tuple((k, as_kind(expanded[k], kind))
                                         for k, kind in kinds.items())
        return {k: _normalized(value[k], kind) for k, kind in kinds.items()}

    @field_validator("constraints")
    @classmethod
    def _constraints_parse(cls, value: list[str], info: ValidationInfo) -> list[str]:
        strategy = _strategy_or_none(info)
        problems = []
        for i, text in enumerate(value):
            try:
                expr = parse_expr(text)
                if strategy is not None:
                    check_names(expr, (*strategy.param_names, *EXECUTION_AXES,
                                       *PORTFOLIO_AXES),
                                what="constraint")
            except SpecError as err:
                problems.append((f"constraints[{i}]", str(err)))
        if problems:
            raise Problems(problems)
        return value

    @model_validator(mode="after")
    def _whole_spec(self, info: ValidationInfo) -> Spec:
        problems = []
        if self.n_workers is not None and self.cluster.kind not in STARTED_HERE:
            problems.append(("n_workers", f"applies to clusters barsweep starts on this "
                             f"machine (auto, threads, local, cuda); the cluster "
                             f"{self.cluster.describe()!r} has its own workers: remove "
                             f"n_workers"))
        context = info.context if isinstance(info.context, dict) else {}
        axes = context.pop("axes", None) or _axes(self)
        for key in STOP_PARAMS:
            if key in self.grid and getattr(self.execution, key) is not None:
                problems.append((f"execution.{key}", f"{key} is also a grid axis; keep one"))
            if key == "take_profit" and key in self.grid:
                check = functools.partial(check_stop, key, direction=self.execution.direction)
                problem = next(filter(None, map(check, dict(axes)[key].tolist())), None)
                if problem:
                    problems.append((f"grid.{key}", problem))
        levered = dict(axes).get("leverage")
        problems += leverage_problems(self.execution, levered, dict(axes).get("size_value"))
        problems += size_problems(self.execution.size, dict(axes).get("size_value"),
                                  self.execution.leverage if levered is None
                                  else float(np.max(levered)))
        problems += order_problems(self.execution.entry_order, dict(axes))
        if (self.execution.size.type == "risk" and self.execution.size.atr is None
                and self.execution.stop_loss is None and "stop_loss" not in self.grid):
            problems.append(("execution.size", RISK_WITHOUT_STOP))
        if self.walk_forward is not None:
            for key in ("train", "test", "step"):
                try:
                    # the form of the length; its bars, with the measured year, at prepare
                    bars_of(getattr(self.walk_forward, key), self.data.timeframe,
                            self.data.year_days or 365.0, key="")
                except SpecError as err:
                    problems.append((f"walk_forward.{key}", str(err)))
        problems += portfolio_problems(self)
        strategy = context.pop("strategy", None) or self.strategy_def
        self._strategy = strategy
        grid = Grid(axes, tuple(parse_expr(text) for text in
                                (*self.constraints, *strategy.requirement_texts)))
        searched = self.search.method != "grid"
        unused = unused_key_problem(self.search, grid)
        if unused:
            problems.append(unused)
        too_big = (too_big_search(grid, self.search,
                                   1 if self.portfolio else len(self.data.symbols),
                                   self.run.max_combos) if searched else
                   _too_big(grid, 1 if self.portfolio else len(self.data.symbols),
                             self.run.max_combos))
        if too_big:
            problems.append(("grid", too_big))
        else:
            reason = _all_excluded(grid)
            if reason:
                problems.append(("constraints", reason))
        if problems:
            raise Problems(problems)
        self._grid = grid
        return self

    @property
    def strategy_def(self) -> Strategy:
        """The spec's strategy: the registered one of its name, or compiled from its
        rules (the grid's axes are its parameters)."""
        if self._strategy is None:
            if isinstance(self.strategy, str):
                self._strategy = get_strategy(self.strategy)
            else:
                expanded = {k: expand(entry) for k, entry in self.grid.items()}
                strategy, problems = _rule_strategy(self.strategy, expanded)
                if problems:
                    raise SpecError("; ".join(f"{k}: {m}" for k, m in problems))
                self._strategy = strategy
        return self._strategy

    @property
    def strategy_name(self) -> str:
        """The strategy's name: the registered name, or the rule's ``name``."""
        return self.strategy if isinstance(self.strategy, str) else self.strategy.name

    @property
    def strategy_ref(self) -> str | Strategy:
        """What a block task names its strategy by: the registered name, or the Strategy
        compiled from the rules (which pickles as its rules)."""
        return self.strategy if isinstance(self.strategy, str) else self.strategy_def

    @property
    def param_grid(self) -> Grid:
        """The grid of the sweep, built once when the spec was validated: one axis per
        strategy parameter in declared order, then the swept stops; the strategy's own
        requirements (e.g. ``lower < upper``) join the spec's constraints."""
        return self._grid

    def to_yaml(self) -> str:
        """The spec as YAML, every key included; :func:`parse_spec` reads it back equal."""
        return dump_yaml(self.model_dump(mode="json"))


#: The tags of ``strategy``'s two forms (a name, rules), dropped from refused keys.
STRATEGY_TAGS = frozenset({"named", "rules"})


def load_spec(path: str | os.PathLike, overrides: Mapping | None = None) -> Spec:
    """Read and validate the sweep spec in the YAML file at `path`.

    `overrides` (e.g. command-line flags, ``{"run": {"out": "r.zarr"}}``) are merged
    into it before validation, as :func:`parse_spec` describes.

    Raises
    ------
    SpecError
        If the file cannot be read, is not YAML, or is not a valid spec; the message
        names the file and every failing key.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read sweep spec {os.fspath(path)}: {err}") from None
    data = load_yaml(text, os.fspath(path))
    if isinstance(data, Mapping):
        base = Path(path).resolve().parent
        data = resolve_paths(data, base)
        if data.get("modules") and data.get("module_dir") is None:
            data["module_dir"] = str(base)
    return parse_spec(data, source=os.fspath(path), overrides=overrides)


def parse_spec(text_or_dict: str | Mapping | Spec, source: str = "<string>",
               overrides: Mapping | None = None, *, modules: bool = True) -> Spec:
    """Validate a sweep spec given as YAML text or as a mapping.

    Parameters
    ----------
    text_or_dict : str, mapping or Spec
        YAML text, or the mapping it would load to (a Spec is returned as it is, or
        validated again with `overrides`).
    source : str, default "<string>"
        Where the spec came from, for messages (the file name).
    overrides : mapping, optional
        Keys that replace the spec's before it is validated, merged section by section
        (``{"run": {"max_combos": 10**10}}`` changes only ``run.max_combos``). None
        values are skipped, so unset command-line flags can be passed as they are.
    modules : bool, default True
        Import the spec's ``modules``. False (a spec read from a results store): import
        nothing, and refuse the spec unless each module is already imported from its
        ``module_dir`` (:func:`~barsweep.pipeline.run.store_modules.import_store_modules`
        imports them when the user asks).

    Returns
    -------
    Spec

    Raises
    ------
    SpecError
        One error listing every failing key as a dotted path, e.g.
        ``execution.fees: Input should be greater than or equal to 0 (got -0.1)``; one
        line when there is one problem, else one indented line per problem.
    """
    if isinstance(text_or_dict, Spec):
        if not overrides:
            return text_or_dict
        text_or_dict = text_or_dict.model_dump(mode="json")
    if isinstance(text_or_dict, str):
        data = load_yaml(text_or_dict, source)
    else:
        data = text_or_dict
    if data is None:
        raise SpecError(f"invalid sweep spec {source}: the spec is empty")
    if not isinstance(data, Mapping):
        hint = "; to read a file, use load_spec(path)" if isinstance(data, str) else ""
        raise SpecError(
            f"invalid sweep spec {source}: expected a mapping of keys (data, strategy, grid, "
            f"...), got {type(data).__name__}{hint}"
        )
    data = merged(data, overrides or {})
    try:
        return Spec.model_validate(data, context={"modules": modules})
    except ValidationError as err:
        lines = refusals(err, Spec, skip=AXIS_TAGS | STRATEGY_TAGS | SECURITY_TAGS)
        if len(lines) == 1:  # one problem: on the first line (a rule's caret lines below)
            raise SpecError(f"invalid sweep spec {source}: {lines[0]}") from None
        body = "\n".join("  " + line.replace("\n", "\n  ") for line in lines)
        raise SpecError(f"invalid sweep spec {source}:\n{body}") from None


# --------------------------------------------------------------------------- helpers


def _axes(spec: Spec) -> tuple[tuple[str, np.ndarray], ...]:
    """The grid's axes from a validated spec's entries (when validated without a context
    that kept them)."""
    kinds = {p.name: _kind(p.kind) for p in spec.strategy_def.params} | dict.fromkeys(
        PORTFOLIO_AXES, "int")
    return tuple((k, expand(entry, kinds.get(k, "float"))) for k, entry in spec.grid.items())


def _too_big(grid: Grid, n_symbols: int, max_combos: int) -> str | None:
    """Why a run of `grid` over `n_symbols` symbols is too large, or None."""
    total = grid.size * n_symbols
    if total <= max_combos:
        return None
    split = f" ({grid.size:,} per symbol x {n_symbols} symbols)" if n_symbols > 1 else ""
    return (f"{total:,} combos{split} exceed run.max_combos ({max_combos:,}); raise it with "
            "--max-combos or run.max_combos, or sample a subset (a smaller grid: a coarser "
            "step, fewer values, tighter constraints), or search it: search.method random, "
            "sobol or halving with a budget (docs/SEARCH.md)")


def _all_excluded(grid: Grid) -> str | None:
    """Why `grid` has no valid combo, or None when it has one."""
    if grid.has_valid():
        return None
    texts = ", ".join(repr(c.text) for c in grid.constraints)
    return (
        f"{texts} exclude every one of the {grid.size} combos of the grid; "
        "loosen the constraints or widen the grid"
    )


def _kind(kind: str) -> str:
    return "int" if kind == "int" else "float"


def _strategy_or_none(info: ValidationInfo) -> Strategy | None:
    """The strategy of the spec being validated, None if its name failed validation
    (or its rules did, or are not compiled yet)."""
    name = info.data.get("strategy")
    if isinstance(name, str):
        return get_strategy(name)
    return info.context.get("strategy") if isinstance(info.context, dict) else None


def _rule_strategy(spec: RuleSpec, expanded: Mapping[str, np.ndarray]
                   ) -> tuple[Strategy | None, list[tuple[str, str]]]:
    """The strategy compiled from the spec's rules, the grid's axes (the stops and a
    portfolio's settings aside) its parameters: int where every value is a whole number.
    Or None and the problems."""
    kinds = {k: "int" if _whole(v) else "float" for k, v in expanded.items()}
    applied = tuple(k for k in expanded if k in EXECUTION_AXES or k in PORTFOLIO_AXES)
    rule = Rule(**spec.rule.model_dump(), name=spec.name)
    try:
        return compile_rule(rule, kinds, where="strategy.rule", extra=applied), []
    except SpecError as err:
        key, _, message = str(err).partition(": ")
        if not key.startswith(("strategy.rule", "grid.")):
            key, message = "strategy.rule", str(err)
        return None, [(key, message)]


def _refused(check, *args) -> list[tuple[str, str]]:
    """``check(*args)``'s refusal (an engine check raising ``SpecError("key: problem")``)
    as the spec's ``[(key, problem)]``; none when it passes."""
    try:
        check(*args)
    except SpecError as err:
        key, _, problem = str(err).partition(": ")
        return [(key, problem)]
    return []


def size_problems(size, swept: np.ndarray | None,
                  leverage: float = 1.0) -> list[tuple[str, str]]:
    """What the spec's size (``execution.size``) and its grid axis ``size_value``
    (``swept``, None without) may not be, as the engine refuses it
    (:func:`~barsweep.engine.core.size_column`): ``(key, problem)``, or none."""
    return _refused(size_column, size, swept, 1, leverage)


def leverage_problems(execution: Execution, swept: np.ndarray | None,
                      size_values: np.ndarray | None) -> list[tuple[str, str]]:
    """What the grid axis ``leverage`` (``swept``, None without) may not be, as the engine
    refuses it (:func:`~barsweep.engine.core.leverage_column`), and a percent size above
    a combo's leverage (some combo of the two axes' product): ``(key, problem)``, or none."""
    if swept is None:
        return []
    problems = _refused(leverage_column, execution, swept, 1)
    if (not problems and execution.size.type == "percent" and size_values is not None
            and np.max(size_values) > np.min(swept)):
        problems = [("grid.size_value", f"type percent takes a fraction of the cash up to "
                                        f"the combo's leverage; size_value "
                                        f"{np.max(size_values):g} meets leverage "
                                        f"{np.min(swept):g}")]
    return problems


def order_problems(order, axes: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """What the spec's entry order (``execution.entry_order``) and its grid axes
    (``entry_offset``, ``valid_bars`` in ``axes``) may not be, as the engine refuses them
    (:func:`~barsweep.engine.core.order_columns`): ``(key, problem)``, or none."""
    return _refused(order_columns, order, {k: axes[k] for k in ORDER_AXES if k in axes}, 1)


def _whole(values: np.ndarray) -> bool:
    values = np.asarray(values)
    return values.dtype.kind in "iu" or bool(
        np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def _strategy_problems(strategy: Strategy, expanded: dict,
                       given: Iterable[str]) -> list[tuple[str, str]]:
    """Grid keys the strategy lacks, parameters the grid lacks, values out of range.

    `expanded` holds the axes that could be read; `given` names every key of the grid,
    so that an axis present but unreadable is not also reported missing."""
    given = frozenset(given)
    names = strategy.param_names
    listed = ", ".join(names) if names else "none"
    problems = []
    for key, values in expanded.items():
        if key in STOP_PARAMS:
            check = functools.partial(check_stop, key)
        elif key in ("size_value", "leverage") or key in ORDER_AXES:
            continue  # checked with the size's type and the order's (:func:`size_problems`)
        elif key in names:
            check = strategy.param(key).check
        else:
            problems.append((f"grid.{key}", f"strategy {strategy.name!r} has no parameter "
                             f"{key!r}; its parameters: {listed} (and the stops "
                             f"{', '.join(STOP_PARAMS)}, size_value, leverage, "
                             f"{', '.join(ORDER_AXES)})"))
            continue
        reason = next(filter(None, map(check, values.tolist())), None)
        if reason:
            problems.append((f"grid.{key}", reason))
    problems += [(f"grid.{name}", f"missing: strategy {strategy.name!r} needs a list of values "
                  f"or a range {{start, stop, step}} for each of its parameters ({listed})")
                 for name in names if name not in given]
    return problems


def _normalized(entry: list | RangeSpec, kind: str) -> list | RangeSpec:
    """`entry` with its numbers as the parameter's kind (ints for int parameters)."""
    cast = int if kind == "int" else float
    if isinstance(entry, RangeSpec):
        bounds = (entry.start, entry.stop, entry.step)
        if kind == "int" and any(isinstance(b, float) and not b.is_integer() for b in bounds):
            return entry  # a fractional bound whose values are still whole (2, 7.5, 1)
        try:
            return RangeSpec(start=cast(entry.start), stop=cast(entry.stop),
                             step=cast(entry.step))
        except OverflowError:  # a step beyond float64 (one value): kept as given
            return entry
    return [cast(v) for v in entry]
