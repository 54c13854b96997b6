"""The sweep spec: one YAML file that describes a run, validated before anything runs.

:func:`load_spec` and :func:`parse_spec` read a spec into a frozen :class:`Spec`, refusing
unknown keys, wrong types and impossible values with ONE :class:`SpecError` that names
the file and every failing key as a dotted path (``execution.fees``, ``grid.fast``,
``constraints[0]``). The grid is checked against the strategy's declared parameters,
and its size against ``run.max_combos`` (counted from the axes, never enumerated).
:func:`build_grid` turns a spec into the :class:`~barsweep.pipeline.grid.Grid` to sweep.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..engine.execution import STOP_PARAMS, Execution, check_stop
from ..engine.strategies import Strategy, get_strategy, import_strategy_module
from ..errors import Problems, SpecError, refusals
from .expr import check_names, parse_expr
from .grid import MAX_COUNTABLE, Grid, axis_values

__all__ = [
    "MAX_COMBOS",
    "DataSpec",
    "RangeSpec",
    "RunSpec",
    "Spec",
    "build_grid",
    "load_spec",
    "parse_spec",
]

_CONFIG = ConfigDict(extra="forbid", frozen=True)
_TIMEFRAME = re.compile(r"^\d+(s|m|h|d|w)$")
_ADDRESS = re.compile(r"^(tcp|tls|ucx|ws|wss)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(:\d{1,5})?$")
_AXIS_TAGS = ("list", "range")  # tags of the grid-entry union, dropped from error paths


def _strict_number(value: Any) -> int | float:
    """Let numbers through as Python int/float; refuse bools, strings and the rest."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"Input should be a number, got {type(value).__name__} {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


Number = Annotated[int | float, BeforeValidator(_strict_number)]


class RangeSpec(BaseModel):
    """A grid axis given as ``{start, stop, step}``; `stop` is inclusive."""

    model_config = _CONFIG

    start: Number
    stop: Number
    step: Number


def _axis_tag(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping | RangeSpec):
        return "range"
    return None


Axis = Annotated[
    Annotated[list[Number], Tag("list")] | Annotated[RangeSpec, Tag("range")],
    Discriminator(
        _axis_tag,
        custom_error_type="grid_axis",
        custom_error_message="Input should be a list of numbers or a range {start, stop, step}",
    ),
]


class DataSpec(BaseModel):
    """Which bars to sweep over.

    ``start`` and ``end`` are ISO dates or datetimes (YAML dates are accepted and kept as
    ISO strings); ``year_days`` is 365 for crypto, 252 for equities.
    """

    model_config = _CONFIG

    store: PathStr
    symbols: list[str] = Field(min_length=1)
    timeframe: str
    start: str | None = None
    end: str | None = None
    year_days: float = Field(365.0, gt=0, strict=True, allow_inf_nan=False)

    @field_validator("symbols", mode="before")
    @classmethod
    def _one_symbol(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("symbols")
    @classmethod
    def _distinct_symbols(cls, value: list[str]) -> list[str]:
        if any(not s.strip() for s in value):
            raise ValueError("symbols must not be empty strings")
        duplicated = sorted({s for s in value if value.count(s) > 1})
        if duplicated:
            raise ValueError(f"symbol {duplicated[0]!r} is listed more than once")
        return value

    @field_validator("timeframe")
    @classmethod
    def _timeframe(cls, value: str) -> str:
        if not _TIMEFRAME.match(value) or int(value[:-1]) == 0:
            raise ValueError(
                f"timeframe must be a positive count and a unit among s, m, h, d, w "
                f"(e.g. '1m', '4h', '1d'), got {value!r}"
            )
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _iso_time(cls, value: Any) -> Any:
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, str):
            _parse_time(value)
        return value

    @model_validator(mode="after")
    def _start_before_end(self) -> DataSpec:
        if self.start is not None and self.end is not None:
            if _parse_time(self.start) >= _parse_time(self.end):
                raise Problems(
                    [("data.end", f"end {self.end!r} must be after start {self.start!r}")]
                )
        return self


#: The default of ``run.max_combos``: larger grids are refused unless it is raised.
MAX_COMBOS = 10**9


class RunSpec(BaseModel):
    """Where and how the sweep runs: backend, combos per block, output store.

    ``block_size: auto`` (default) sizes blocks from the grid, the bars and the workers
    (see :func:`barsweep.pipeline.run.auto_block_size`). ``max_combos`` bounds the
    combos of a run (the grid's box, before constraints, times the symbols): a larger
    spec is refused before anything runs, a guard against a mistyped range.
    """

    model_config = _CONFIG

    backend: Literal["auto", "cpu", "cuda"] = "auto"
    block_size: int | str = "auto"
    out: PathStr = Field("results.zarr", validate_default=True)
    max_combos: int = Field(MAX_COMBOS, gt=0, le=MAX_COUNTABLE, strict=True)
    worker_timeout: float = Field(60.0, gt=0, allow_inf_nan=False)

    @field_validator("block_size", mode="before")
    @classmethod
    def _block_size(cls, value: Any) -> Any:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"Input should be a valid integer or 'auto' (got {value!r})")
        if value <= 0:
            raise ValueError(f"Input should be greater than 0 (got {value!r})")
        return value


def _absolute(value: Any) -> Any:
    """A path made absolute on the driver (``~`` expanded, relative to the current
    directory; :func:`load_spec` first resolves a spec file's paths against its own
    directory), so that no worker resolves it against its own directory."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str) and value.strip():
        return os.path.abspath(os.path.expanduser(value))
    return value


#: A path in a spec: absolute once validated.
PathStr = Annotated[str, Field(min_length=1), BeforeValidator(_absolute)]

#: Where the spec's paths live: resolved against the spec file's directory by load_spec.
PATH_KEYS = (("data", "store"), ("run", "out"), ("cluster", "security", "ca"),
             ("cluster", "security", "cert"), ("cluster", "security", "key"))


def _readable_file(value: str) -> str:
    if not os.path.isfile(value):
        raise ValueError(f"no file at {value}")
    if not os.access(value, os.R_OK):
        raise ValueError(f"{value} is not readable")
    return value


TlsFile = Annotated[PathStr, AfterValidator(_readable_file)]


class SecuritySpec(BaseModel):
    """TLS to the Dask cluster: the certificate authority that signed the scheduler's
    and workers' certificates, and this client's certificate and private key (PEM
    files; the key may be in ``cert``'s file too, then give that file twice)."""

    model_config = _CONFIG

    ca: TlsFile
    cert: TlsFile
    key: TlsFile


#: Kinds of cluster: started here (local, cuda), reached (scheduler), or submitted as
#: batch jobs through dask-jobqueue (slurm, pbs).
CLUSTER_KINDS = ("local", "cuda", "scheduler", "slurm", "pbs")
_JOBQUEUE_KEYS = ("cores", "memory", "walltime", "jobs", "queue", "account",
                  "job_directives", "interface")
_DASHBOARD = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]*):\d{1,5}$")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([kKMGTP]i?B|B)$")
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}:\d{2}(:\d{2})?$")


class ClusterSpec(BaseModel):
    """Where the blocks run.

    ``kind``: ``local`` (a LocalCluster of one single-threaded worker process per core,
    the default), ``cuda`` (dask-cuda's LocalCUDACluster, one worker per GPU),
    ``scheduler`` (a running scheduler at ``address``, with TLS when ``security`` is
    given), or ``slurm`` / ``pbs`` (batch jobs through dask-jobqueue, the ``[hpc]``
    extra: ``jobs`` jobs of ``cores`` single-threaded workers sharing ``memory``, for
    ``walltime``, in ``queue`` billed to ``account``, with extra ``job_directives``).
    ``dashboard`` is where a cluster barsweep starts serves its dashboard:
    127.0.0.1 (this machine only) unless it says otherwise. A spec may say just
    ``cluster: local`` (or ``cuda``, ``slurm``, ``pbs``, or an address).
    """

    model_config = _CONFIG

    kind: Literal["local", "cuda", "scheduler", "slurm", "pbs"] = "local"
    address: str | None = None
    dashboard: str = "127.0.0.1:8787"
    security: SecuritySpec | None = None
    cores: int | None = Field(None, gt=0, strict=True)
    memory: str | None = None
    walltime: str = "01:00:00"
    jobs: int = Field(1, gt=0, strict=True)
    queue: str | None = None
    account: str | None = None
    job_directives: list[str] = Field(default_factory=list)
    interface: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value in CLUSTER_KINDS and value != "scheduler":
                return {"kind": value}
            if _ADDRESS.match(value):
                return {"kind": "scheduler", "address": value}
            raise ValueError(
                "cluster must be 'local', 'cuda' or a scheduler address such as "
                f"'tcp://host:8786' (or 'slurm', 'pbs', or a mapping with kind), got {value!r}")
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not _ADDRESS.match(value):
            raise ValueError(f"expected a scheduler address such as 'tcp://host:8786' or "
                             f"'tls://host:8786', got {value!r}")
        return value

    @field_validator("dashboard")
    @classmethod
    def _dashboard(cls, value: str) -> str:
        if not _DASHBOARD.match(value):
            raise ValueError(f"expected HOST:PORT such as '127.0.0.1:8787' or '0.0.0.0:8787' "
                             f"(port 0: any free one), got {value!r}")
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and not _MEMORY.match(value):
            raise ValueError(f"expected an amount such as '16GB' or '64GiB', got {value!r}")
        return value

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value: str) -> str:
        if not _WALLTIME.match(value):
            raise ValueError(f"expected HH:MM:SS (or D-HH:MM:SS), got {value!r}")
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> ClusterSpec:
        problems = []
        fields = type(self).model_fields
        given = {k for k in self.model_fields_set
                 if getattr(self, k) != fields[k].get_default(call_default_factory=True)}
        jobqueue = self.kind in ("slurm", "pbs")
        if self.kind == "scheduler":
            if self.address is None:
                problems.append(("cluster.address", "kind 'scheduler' needs the scheduler's "
                                 "address, e.g. tcp://host:8786"))
            if "dashboard" in given:
                problems.append(("cluster.dashboard", "applies to clusters barsweep starts; "
                                 "a running scheduler serves its own dashboard"))
            if self.security is not None and self.address and not self.address.startswith(
                    "tls://"):
                problems.append(("cluster.security", f"TLS needs a tls:// address, got "
                                 f"{self.address!r}"))
        elif self.address is not None:
            problems.append(("cluster.address", f"applies to kind 'scheduler', not "
                             f"{self.kind!r}"))
        if self.kind in ("local", "cuda") and self.security is not None:
            problems.append(("cluster.security", f"applies to a remote scheduler or to "
                             f"slurm/pbs; a {self.kind} cluster stays on this machine"))
        for key in _JOBQUEUE_KEYS:
            if key in given and not jobqueue:
                problems.append((f"cluster.{key}", f"applies to kinds slurm and pbs, not "
                                 f"{self.kind!r}"))
        if jobqueue:
            for key in ("cores", "memory"):
                if getattr(self, key) is None:
                    problems.append((f"cluster.{key}", f"kind {self.kind!r} needs {key} "
                                     f"(per job), e.g. cores: 32, memory: 64GB"))
        if problems:
            raise Problems(problems)
        return self

    def describe(self) -> str:
        """``local``, ``tcp://host:8786``, ``slurm (4 jobs of 32 cores)``..."""
        if self.kind == "scheduler":
            return str(self.address)
        if self.kind in ("slurm", "pbs"):
            return f"{self.kind} ({self.jobs} jobs of {self.cores} cores)"
        return self.kind


class Spec(BaseModel):
    """A whole sweep: data, strategy, grid, constraints, execution, run and cluster.

    Attributes
    ----------
    grid : dict of str to list or RangeSpec
        One entry per strategy parameter, in the order the strategy declares them, with
        int values for int parameters and floats for the others.
    constraints : list of str
        Expressions over the parameter names (see :mod:`barsweep.pipeline.expr`).
    cluster : ClusterSpec
        Where the blocks run; the spec may say just ``local``, ``cuda``, ``slurm``,
        ``pbs`` or a scheduler address such as ``tcp://host:8786``.
    n_workers : int or None
        Workers of a cluster barsweep starts (local or cuda); refused with an address.

    Examples
    --------
    >>> spec = parse_spec({"data": {"store": "bars/", "symbols": "BTCUSDT", "timeframe": "1h"},
    ...                    "strategy": "ema_cross",
    ...                    "grid": {"fast": [5, 10], "slow": {"start": 20, "stop": 40, "step": 10}},
    ...                    "constraints": ["fast < slow"]})
    >>> build_grid(spec).shape
    (2, 3)
    """

    model_config = _CONFIG

    data: DataSpec
    modules: list[str] = Field(default_factory=list)
    strategy: str
    grid: dict[str, Axis] = Field(default_factory=dict, validate_default=True)
    constraints: list[str] = Field(default_factory=list)
    execution: Execution = Field(default_factory=Execution)
    run: RunSpec = Field(default_factory=RunSpec)
    cluster: ClusterSpec = Field(default_factory=lambda: ClusterSpec())
    n_workers: int | None = Field(None, gt=0, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, value: Any) -> Any:
        """A section left empty in YAML (``grid:``) means its default."""
        if isinstance(value, Mapping):
            optional = ("grid", "constraints", "execution", "run")
            return {k: v for k, v in value.items() if not (k in optional and v is None)}
        return value

    @field_validator("modules")
    @classmethod
    def _import_modules(cls, value: list[str]) -> list[str]:
        """Import the modules that register custom strategies (before ``strategy``)."""
        problems = []
        for i, name in enumerate(value):
            try:
                import_strategy_module(name)
            except SpecError as err:
                problems.append((f"modules[{i}]", str(err)))
        if problems:
            raise Problems(problems)
        return value

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        get_strategy(value)
        return value

    @field_validator("grid")
    @classmethod
    def _grid_fits_strategy(cls, value: dict, info: ValidationInfo) -> dict:
        strategy = _strategy_or_none(info)
        problems = []
        expanded = {}
        for key, entry in value.items():
            try:
                expanded[key] = axis_values(entry)
            except SpecError as err:
                problems.append((f"grid.{key}", str(err)))
        if strategy is None:
            if problems:
                raise Problems(problems)
            return value
        problems += _strategy_problems(strategy, expanded, given=value.keys())
        if problems:
            raise Problems(problems)
        normalized = {p.name: _normalized(value[p.name], p.kind) for p in strategy.params}
        normalized.update({k: _normalized(value[k], "float") for k in STOP_PARAMS if k in value})
        return normalized

    @field_validator("constraints")
    @classmethod
    def _constraints_parse(cls, value: list[str], info: ValidationInfo) -> list[str]:
        strategy = _strategy_or_none(info)
        problems = []
        for i, text in enumerate(value):
            try:
                expr = parse_expr(text)
                if strategy is not None:
                    check_names(expr, (*strategy.param_names, *STOP_PARAMS), what="constraint")
            except SpecError as err:
                problems.append((f"constraints[{i}]", str(err)))
        if problems:
            raise Problems(problems)
        return value

    @model_validator(mode="after")
    def _whole_spec(self) -> Spec:
        problems = []
        if self.n_workers is not None and self.cluster.kind not in ("local", "cuda"):
            problems.append(
                (
                    "n_workers",
                    f"applies to clusters barsweep starts on this machine (local, cuda); "
                    f"the cluster {self.cluster.describe()!r} has its own workers: remove "
                    f"n_workers",
                )
            )
        for key in STOP_PARAMS:
            if key in self.grid and getattr(self.execution, key) is not None:
                problems.append((f"execution.{key}", f"{key} is also a grid axis; keep one"))
            if key == "take_profit" and key in self.grid:
                for v in axis_values(self.grid[key], kind="float").tolist():
                    problem = check_stop(key, v, self.execution.direction)
                    if problem:
                        problems.append((f"grid.{key}", problem))
                        break
        grid = _grid(self)
        too_big = _too_big(grid, len(self.data.symbols), self.run.max_combos)
        if too_big:
            problems.append(("grid", too_big))
        else:
            reason = _all_excluded(grid)
            if reason:
                problems.append(("constraints", reason))
        if problems:
            raise Problems(problems)
        return self

    def to_yaml(self) -> str:
        """The spec as YAML, every key included; :func:`parse_spec` reads it back equal."""
        return yaml.dump(
            self.model_dump(mode="json"), Dumper=_Dumper, sort_keys=False, default_flow_style=False
        )


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
    data = _load_yaml(text, os.fspath(path))
    if isinstance(data, Mapping):
        data = resolve_paths(data, Path(path).resolve().parent)
    return parse_spec(data, source=os.fspath(path), overrides=overrides)


def with_scheduler(spec: Spec, address: str | None = None,
                   tls: Mapping[str, str | None] | None = None) -> Spec:
    """``spec`` run on the scheduler at ``address`` (``--scheduler``), with the TLS files
    ``tls`` (``{"ca", "cert", "key"}``, from ``--tls-*``; relative to the current
    directory) replacing ``cluster.security``; SpecError naming the flag when refused."""
    tls = {k: v for k, v in (tls or {}).items() if v is not None}
    if address is None and not tls:
        return spec
    if tls and len(tls) < 3:
        missing = ", ".join(f"--tls-{k}" for k in ("ca", "cert", "key") if k not in tls)
        raise SpecError(f"TLS needs --tls-ca, --tls-cert and --tls-key together: {missing} "
                        f"missing")
    data = spec.cluster.model_dump(exclude_unset=True)
    if address is not None:
        data = {"kind": "scheduler", "address": address,
                **({"security": data["security"]} if "security" in data else {})}
    if tls:
        data["security"] = tls
    try:
        cluster = ClusterSpec.model_validate(data)
    except ValidationError as err:
        lines = _error_lines(err)
        for part in ("ca", "cert", "key"):  # a flag's file: name the flag
            lines = [line.replace(f"security.{part}:", f"--tls-{part}:")
                     if part in tls else line for line in lines]
        raise SpecError(f"--scheduler/--tls-*: {'; '.join(lines)}") from None
    return spec.model_copy(update={"cluster": cluster})


def resolve_paths(data: Mapping, base: str | os.PathLike) -> dict:
    """A raw spec mapping with each relative path of :data:`PATH_KEYS` joined to
    ``base`` (the spec file's directory; ``~`` expanded); other values untouched."""

    def resolve(node: Any, keys: tuple[str, ...]) -> Any:
        if not isinstance(node, Mapping) or keys[0] not in node:
            return node
        value = node[keys[0]]
        if len(keys) > 1:
            value = resolve(value, keys[1:])
        elif isinstance(value, str) and value.strip():
            value = os.path.join(base, os.path.expanduser(value))
        return {**node, keys[0]: value}

    for keys in PATH_KEYS:
        data = resolve(data, keys)
    return dict(data)


def parse_spec(text_or_dict: str | Mapping | Spec, source: str = "<string>",
               overrides: Mapping | None = None) -> Spec:
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
        data = _load_yaml(text_or_dict, source)
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
    data = _merged(data, overrides or {})
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        lines = _error_lines(err)
        if len(lines) == 1 and "\n" not in lines[0]:
            raise SpecError(f"invalid sweep spec {source}: {lines[0]}") from None
        body = "\n".join("  " + line.replace("\n", "\n  ") for line in lines)
        raise SpecError(f"invalid sweep spec {source}:\n{body}") from None


def build_grid(spec: Spec) -> Grid:
    """The grid of `spec`: one axis per strategy parameter, in declared order.

    Raises
    ------
    SpecError
        If the constraints exclude every combo.
    """
    grid = _grid(spec)
    reason = _all_excluded(grid)
    if reason:
        raise SpecError(f"constraints: {reason}")
    return grid


# --------------------------------------------------------------------------- helpers


def _grid(spec: Spec) -> Grid:
    """Strategy parameters in declared order, then swept stops; the strategy's own
    requirements (e.g. ``lower < upper``) join the spec's constraints."""
    strategy = get_strategy(spec.strategy)
    axes = tuple(
        (p.name, axis_values(spec.grid[p.name], kind=_kind(p.kind))) for p in strategy.params
    )
    axes += tuple((k, axis_values(spec.grid[k], kind="float")) for k in STOP_PARAMS
                  if k in spec.grid)
    texts = (*spec.constraints, *strategy.requirement_texts)
    return Grid(axes, tuple(parse_expr(text) for text in texts))


def _too_big(grid: Grid, n_symbols: int, max_combos: int) -> str | None:
    """Why a run of `grid` over `n_symbols` symbols is too large, or None."""
    total = grid.size * n_symbols
    if total <= max_combos:
        return None
    split = f" ({grid.size:,} per symbol x {n_symbols} symbols)" if n_symbols > 1 else ""
    return (f"{total:,} combos{split} exceed run.max_combos ({max_combos:,}); raise it with "
            "--max-combos or run.max_combos, or shrink the grid")


def _all_excluded(grid: Grid) -> str | None:
    """Why `grid` has no valid combo, or None when it has one."""
    if grid.has_valid():
        return None
    texts = ", ".join(repr(c.text) for c in grid.constraints)
    return (
        f"{texts} exclude every one of the {grid.size} combos of the grid; "
        "loosen the constraints or widen the grid"
    )


def _merged(base: Mapping, overrides: Mapping) -> dict:
    """`base` with `overrides` merged in, mapping into mapping; None overrides skipped.

    A section that `base` leaves empty (None) takes the override's mapping; one that is
    not a mapping is kept, for validation to refuse it with its key."""
    merged = dict(base)
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            current = merged.get(key)
            if current is None:
                merged[key] = _merged({}, value)
            elif isinstance(current, Mapping):
                merged[key] = _merged(current, value)
        else:
            merged[key] = value
    return merged


def _kind(kind: str) -> str:
    return "int" if kind == "int" else "float"


def _strategy_or_none(info: ValidationInfo) -> Strategy | None:
    """The strategy of the spec being validated, None if its name failed validation."""
    name = info.data.get("strategy")
    return None if name is None else get_strategy(name)


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
            for v in values.tolist():
                reason = check_stop(key, v)
                if reason:
                    problems.append((f"grid.{key}", reason))
                    break
            continue
        if key not in names:
            problems.append(
                (
                    f"grid.{key}",
                    f"strategy {strategy.name!r} has no parameter {key!r}; "
                    f"its parameters: {listed} (and the stops {', '.join(STOP_PARAMS)})",
                )
            )
            continue
        param = strategy.param(key)
        for v in values.tolist():
            reason = param.check(v)
            if reason:
                problems.append((f"grid.{key}", reason))
                break
    for name in names:
        if name not in given:
            problems.append(
                (
                    f"grid.{name}",
                    f"missing: strategy {strategy.name!r} needs a list of values "
                    f"or a range {{start, stop, step}} for each of its parameters ({listed})",
                )
            )
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


def _parse_time(text: str) -> datetime:
    """`text` as a naive UTC datetime; ValueError if it is not an ISO date or datetime."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"expected an ISO date or datetime such as '2021-01-31' or "
            f"'2021-01-31T12:00:00Z', got {text!r}"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


class _Loader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    twice = key in seen
                except TypeError:  # an unhashable key: SafeLoader refuses it below
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"found key {key!r} twice",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    """A safe YAML dumper that writes lists (symbols, values, constraints) on one line."""


def _flow_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(list, _flow_list)


def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise SpecError(f"invalid sweep spec {source}: not valid YAML{where}: {problem}") from None


def _error_lines(err: ValidationError) -> list[str]:
    return refusals(err, Spec, skip=frozenset(_AXIS_TAGS))
