"""The results store: one Zarr v3 group per run (docs/RESULTS.md).

Dims ``symbol`` and one per grid parameter; one float64 variable per metric,
chunked exactly as the blocks, so each Dask task writes its own chunks; a
``done`` flag per block (0 pending, 1 computed, 2 excluded by the constraints), after
the block's record of the chunks it wrote (``written``). Every array's chunks end
with their CRC-32C (:mod:`.integrity` says how readers check them).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import zarr

from ...engine import LOWER_IS_BETTER, METRICS
from ...engine.core import METRIC_INFO
from ...errors import ResultsError, RunError
from .integrity import COMPUTED as COMPUTED  # re-exported: the flags, read and said
from .integrity import EXCLUDED as EXCLUDED
from .integrity import PENDING as PENDING
from .integrity import WRITTEN, check_integrity, reading
from .integrity import done_flags as done_flags
from .integrity import resume_hint as resume_hint
from .lock import out_lock as out_lock  # re-exported: the store's lock
from .portfolio_block import MEMBER_VARS, SEGMENT_SUMS

#: The group attribute that marks a directory as a barsweep results store (its value is
#: the layout's version). Stores without it are recognised by ``spec`` and
#: ``barsweep_version``.
STORE_MARK = "barsweep_results"
STORE_LAYOUT = 2  # 2: checksums and the blocks' records (integrity.CHECKED_LAYOUT)
_VIRTUAL_FS = ("/proc", "/sys", "/dev")


def create_store(
    path: str,
    symbols: Sequence[str],
    axes: Sequence[tuple[str, np.ndarray]],
    chunks: Sequence[int],
    n_blocks: int,
    attrs: Mapping[str, str],
    excluded: Sequence[int] = (),
    *,
    lead: Sequence[tuple[str, np.ndarray, int]] = (),
    segments: int = 0,
    coords: Mapping[str, tuple[tuple[str, ...], np.ndarray]] | None = None,
    extra: Sequence[str] = (),
    members: Sequence[str] = (),
    driver_vars: Sequence[str] = (),
    remove_later: bool = False,
) -> None:
    """Write the store's metadata and coordinates; no metric chunk is written.

    The store is made under a hidden name beside ``path`` and renamed into place when
    whole (replacing an earlier results store there, which :func:`check_out` allowed), so
    ``path`` never holds a half-made store; its ``complete`` attribute is false and every
    block not in ``excluded`` is pending until :func:`finish_store`.

    Parameters
    ----------
    path : str
        Directory of the Zarr group.
    symbols : sequence of str
    axes : sequence of (name, values)
        Parameter dims in order; values int64 or float64.
    chunks : sequence of int
        Chunk length of each parameter dim (the block shape).
    n_blocks : int
        Number of blocks over all symbols (length of ``done``).
    attrs : mapping of str to str
        Group attributes (the spec as YAML, version, fingerprint as JSON...).
    excluded : sequence of int
        Blocks the constraints exclude entirely (flagged ``EXCLUDED``, never computed).
    lead : sequence of (name, values, chunk)
        Dims between ``symbol`` and the parameters, with their chunk length: a
        walk-forward run's ``window`` (chunk 1) and ``sample`` (chunk 2).
    segments : int
        With S > 0, the variables :data:`SEGMENT_SUMS` over ``(symbol, segment,
        *params)``, one chunk over the segments.
    coords : mapping of name to (dims, values), optional
        More coordinates (``n_bars`` over symbol, the windows' bounds over window...).
    extra : sequence of str
        More float64 variables chunked as the metrics, NaN until written (a search's
        ``rung``, ``bars_run`` and ``reach``).
    driver_vars : sequence of str
        Those of ``extra`` that the driver writes, not the blocks (a search's ``reach``).
    members : sequence of str
        A portfolio's member symbols: the ``member`` dim of :data:`MEMBER_VARS`,
        over ``(member, *lead, *params)``, chunked as the metrics with the whole
        ``member``.
    remove_later : bool
        Remove the earlier store it replaces on a thread of its own (:func:`finish_store`
        waits for it), not before returning.
    """
    ds, encoding = empty_store(symbols, axes, chunks, n_blocks, attrs, lead=lead,
                               segments=segments, coords=coords, extra=extra,
                               members=members, driver_vars=driver_vars)
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = final.parent / f".{final.name}.new-{tag}"
    try:
        ds.to_zarr(tmp, mode="w-", compute=False, consolidated=False, zarr_format=3,
                   encoding=encoding, write_empty_chunks=True)  # every coordinate chunk
        mark_excluded(str(tmp), excluded)
        old = final.parent / f".{final.name}.old-{tag}"
        put_in_place(tmp, final, old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not remove_later:
        shutil.rmtree(old, ignore_errors=True)
    elif old.exists():
        remove_in_background(old)


#: The threads removing earlier stores (:func:`remove_in_background`), until waited for.
_REMOVING: list[threading.Thread] = []


def remove_in_background(path: Path) -> None:
    """Remove the directory ``path`` on a thread of its own (not a daemon: the process
    ends once it is done); :func:`wait_removals` waits for it."""
    thread = threading.Thread(target=shutil.rmtree, args=(path,),
                              kwargs={"ignore_errors": True}, name="barsweep-remove-store")
    thread.start()
    _REMOVING.append(thread)


def wait_removals() -> None:
    """Return once every removal :func:`remove_in_background` started is done."""
    while True:
        try:
            thread = _REMOVING.pop()
        except IndexError:  # none left (another thread may have taken the last)
            return
        thread.join()


def empty_store(symbols: Sequence[str], axes: Sequence[tuple[str, np.ndarray]],
                chunks: Sequence[int], n_blocks: int, attrs: Mapping[str, str], *,
                lead: Sequence[tuple[str, np.ndarray, int]] = (), segments: int = 0,
                coords: Mapping | None = None, extra: Sequence[str] = (),
                members: Sequence[str] = (), driver_vars: Sequence[str] = ()) -> tuple:
    """The results store of :func:`create_store`'s arguments as an ``xarray.Dataset``
    of lazy NaN metrics (dask arrays, nothing computed), and its Zarr encoding: each
    metric chunked as the blocks, with its long name, units and which way is better;
    every array checksummed (:func:`checksummed`), and ``written`` naming the
    variables each block writes and every array."""
    import dask.array as da
    import xarray as xr

    params = [name for name, _ in axes]
    dims = ("symbol", *[name for name, _, _ in lead], *params)
    shape = (len(symbols), *[len(v) for _, v, _ in lead], *[len(v) for _, v in axes])
    block = (1, *[c for _, _, c in lead], *chunks)
    every = {"symbol": np.asarray(symbols, dtype=object)}
    every.update({name: values for name, values, _ in lead})
    every.update({name: values for name, values in axes})
    every.update(coords or {})
    data_vars = {
        name: (dims, da.full(shape, np.nan, chunks=block, dtype=np.float64))
        for name in (*METRICS, *extra)
    }
    seg_block = (1, segments, *chunks)
    if segments:
        seg_dims = ("symbol", "segment", *params)
        seg_shape = (len(symbols), segments, *[len(v) for _, v in axes])
        data_vars.update({name: (seg_dims, da.full(seg_shape, np.nan, chunks=seg_block,
                                                   dtype=np.float64))
                          for name in SEGMENT_SUMS})
    member_block = (len(members), *block[1:])
    if len(members):
        every["member"] = np.asarray(members, dtype=object)
        data_vars.update({name: (("member", *dims[1:]), da.full(
            (len(members), *shape[1:]), np.nan, chunks=member_block,
            dtype=np.float64)) for name in MEMBER_VARS})
    data_vars["done"] = (("block",), da.zeros(n_blocks, chunks=1, dtype=np.int8))
    data_vars[WRITTEN] = (("block",), da.zeros(n_blocks, chunks=1, dtype=np.int16))
    ds = xr.Dataset(data_vars, coords=every,
                    attrs={**attrs, STORE_MARK: STORE_LAYOUT, "complete": False})
    for name in METRICS:
        long_name, units = METRIC_INFO[name]
        ds[name].attrs.update({"long_name": long_name,
                               "better": "lower" if name in LOWER_IS_BETTER else "higher",
                               **({"units": units} if units else {})})
    ds["done"].attrs["flag_values"] = [PENDING, COMPUTED, EXCLUDED]
    ds["done"].attrs["flag_meanings"] = "pending computed excluded"
    ds[WRITTEN].attrs.update({
        "long_name": "chunks each block wrote",
        "block_vars": [v for v in data_vars if v not in ("done", WRITTEN, *driver_vars)],
        "coords": sorted(map(str, ds.coords)), "arrays": sorted(map(str, ds.variables))})
    encoding = {name: {"chunks": block, "fill_value": np.nan} for name in (*METRICS, *extra)}
    if segments:
        encoding.update({name: {"chunks": seg_block, "fill_value": np.nan}
                         for name in SEGMENT_SUMS})
    if len(members):
        encoding.update({name: {"chunks": member_block, "fill_value": np.nan}
                         for name in MEMBER_VARS})
        encoding["member"] = {"chunks": (len(members),)}
    encoding["done"] = {"chunks": (1,), "fill_value": PENDING}
    encoding[WRITTEN] = {"chunks": (1,), "fill_value": 0}
    encoding["symbol"] = {"chunks": (len(symbols),)}
    for name, values in axes:
        encoding[name] = {"chunks": (len(values),)}
    for name, values, _ in lead:
        encoding[name] = {"chunks": (len(values),)}
    for name, (_, values) in (coords or {}).items():
        if name not in encoding and np.ndim(values) == 1:
            encoding[name] = {"chunks": (len(values),)}
    return ds, checksummed(ds, encoding)


def checksummed(ds, encoding: dict) -> dict:
    """``encoding`` with zarr's default compressor and then its ``crc32c`` codec on
    every variable of ``ds``: each chunk file ends with the CRC-32C of the rest."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return {name: {**encoding.get(name, {}),
                   "compressors": (ZstdCodec(level=0, checksum=False), Crc32cCodec())}
            for name in map(str, ds.variables)}


def put_in_place(made: Path, final: Path, old: Path) -> None:
    """Rename the store ``made`` to ``final``; an earlier results store there is moved
    to ``old`` first (and put back if the rename fails), for the caller to remove."""
    if final.exists() or final.is_symlink():
        # checked again here, not only by check_out before the cluster started
        if final.is_symlink() or not final.is_dir() or (
                store_attrs(final) is None and any(final.iterdir())):
            raise ResultsError(f"--out {final} changed since the run was checked and is "
                               f"not a barsweep results store now; nothing was replaced")
        os.rename(final, old)
        try:
            os.rename(made, final)
        except BaseException:
            os.rename(old, final)  # put the earlier store back
            raise
    else:
        os.rename(made, final)


def write_block(path: str, region: tuple[slice, ...], values: Mapping[str, np.ndarray],
                block_id: int, cells: np.ndarray | None = None) -> None:
    """Write one block's variables (every chunk, NaN ones too), its record of how many
    chunks it wrote (``written``), then mark it done.

    Parameters
    ----------
    region : tuple of slice
        The metrics' ``(symbol, *lead, *params)`` slices; must cover whole chunks. The
        segment sums take ``(symbol, every segment, *params)``.
    values : mapping of variable name to ndarray, or ndarray, float64
        Each variable's region (``blocks.block_metrics``), or the metrics' regions in
        ``METRICS`` order as one array; NaN where a combo is excluded.
    cells : ndarray of int64, optional
        Write only these offsets along the region's last dim (a search rung's combos),
        keeping what the region holds elsewhere.
    """
    if isinstance(values, np.ndarray):
        values = dict(zip(METRICS, values, strict=True))
    group = zarr.open_group(path, mode="r+")
    for name, array in values.items():
        where = ((region[0], slice(None), *region[1:]) if name in SEGMENT_SUMS else
                 (slice(None), *region[1:]) if name in MEMBER_VARS else region)
        stored = group[name].with_config({"write_empty_chunks": True})
        if cells is not None and len(cells) < array.shape[-1]:  # keep the other cells
            merged = stored[where]
            merged[..., cells] = array[..., cells]
            array = merged
        stored[where] = array
    if WRITTEN in group:  # a store of the checked layout
        group[WRITTEN][block_id] = len(values)
    group["done"][block_id] = COMPUTED


def mark_excluded(path: str, block_ids: Sequence[int]) -> None:
    """Flag blocks that the constraints exclude entirely (never computed)."""
    if len(block_ids):
        done = zarr.open_group(path, mode="r+")["done"]
        ids = np.asarray(block_ids)
        flags = done[:]
        flags[ids] = EXCLUDED
        done[:] = flags


def store_status(path: str) -> tuple[int, int]:
    """``(pending blocks, blocks to compute)`` of a results store, from its ``done``
    flags; blocks the constraints exclude are never computed and count in neither."""
    computed, pending, _ = block_tally(path)
    return pending, computed + pending


def block_tally(path: str) -> tuple[int, int, int]:
    """``(computed, pending, excluded)`` blocks of a results store, from its ``done``
    flags: the blocks a run computes are the computed and the pending ones."""
    flags = done_flags(path)
    return tuple(int(np.count_nonzero(flags == f)) for f in (COMPUTED, PENDING, EXCLUDED))


def done_mask(path: str) -> np.ndarray:
    """Which combos lie in a computed block: bool, shape ``(symbol, *params)``."""
    group = zarr.open_group(str(path), mode="r")
    shape, chunks = group[METRICS[0]].shape, group[METRICS[0]].chunks
    counts = [-(-n // c) for n, c in zip(shape, chunks)]
    # a search's later rungs flag their blocks after these: its cells hold rung 0 on
    blocks = (done_flags(path)[:math.prod(counts)] == COMPUTED).reshape(counts)
    for axis, c in enumerate(chunks):
        blocks = np.repeat(blocks, c, axis=axis)
    return blocks[tuple(slice(0, n) for n in shape)]


def finish_store(path: str, attrs: Mapping[str, object]) -> None:
    """Add ``attrs`` and set ``complete: true``, or raise when a block is still pending;
    first, wait for the removal of any earlier store (:func:`wait_removals`)."""
    wait_removals()
    pending = np.flatnonzero(done_flags(path) == PENDING)
    if len(pending):
        raise RunError(
            f"{path}: {len(pending)} block(s) were not written (first ids: "
            f"{pending[:5].tolist()}); the run did not complete"
        )
    update_attrs(path, {**attrs, "complete": True})
    consolidate(path)


#: What zarr says of every store it consolidates (its format 3 leaves consolidated
#: metadata out); barsweep's own readers do not use it (``consolidated=False``).
_NOT_IN_THE_SPEC = "Consolidated metadata is currently not part"


def consolidate(path: str) -> None:
    """Gather the finished store's metadata into its root ``zarr.json`` (zarr's
    consolidated metadata), so that ``xr.open_zarr(path)`` opens it in one read and
    without warning; zarr's note that format 3 leaves consolidated metadata out is not
    repeated. A run that writes the store again drops it first (:func:`unconsolidate`)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NOT_IN_THE_SPEC)
        zarr.consolidate_metadata(path, zarr_format=3)


def unconsolidate(path: str) -> None:
    """Drop the consolidated metadata a finished run left in the store at ``path``
    (nothing when it has none): a run that writes it again (``--resume``) must not read
    a copy of the arrays' metadata taken before, and consolidates anew when it finishes
    (:func:`finish_store`). The root ``zarr.json`` is replaced whole (a temporary file
    renamed over it)."""
    meta = Path(path) / "zarr.json"
    doc = json.loads(meta.read_text(encoding="utf-8"))
    if doc.pop("consolidated_metadata", None) is None:
        return
    tmp = meta.with_name(f".zarr.json.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    os.replace(tmp, meta)


def update_attrs(path: str, attrs: Mapping[str, object]) -> None:
    """Add attributes (e.g. timings) to the store's group after the run."""
    zarr.open_group(path, mode="r+").attrs.update(
        {k: v if isinstance(v, str | bool | int) else json.dumps(v) for k, v in attrs.items()}
    )


def store_attrs(path: str | os.PathLike) -> dict | None:
    """The group attributes of the barsweep results store at ``path``, or None when
    ``path`` is not one (no Zarr group there, or a group barsweep did not make)."""
    meta = Path(path) / "zarr.json"
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("node_type") != "group":
        return None
    attrs = doc.get("attributes")
    if not isinstance(attrs, dict):
        return None
    if STORE_MARK in attrs or ("spec" in attrs and "barsweep_version" in attrs):
        return attrs
    return None


def check_out(path: str | os.PathLike, *, overwrite: bool = False,
              resume: bool = False) -> str:
    """Where a run may write its results store: ``path`` made absolute, or ResultsError.

    ``path`` may be new (its nearest existing ancestor must be a writable directory on a
    real filesystem), an empty directory, or a barsweep results store: replaced only
    with ``overwrite``, continued only with ``resume``. Anything else (a file, a
    directory holding other things, a path inside /proc) is refused, naming it; nothing is
    written or removed here.
    """
    out = Path(os.path.abspath(os.fspath(path)))
    real = out.resolve()
    for root in _VIRTUAL_FS:
        if real == Path(root) or real.is_relative_to(root):
            raise ResultsError(f"--out {out}: {root} is a virtual filesystem, not a place for "
                               f"results; choose a directory on disk")
    if out.is_symlink():
        raise ResultsError(f"--out {out} is a symbolic link; give the path it stands for "
                           f"({real}) or another one")
    if out.exists():
        if not out.is_dir():
            raise ResultsError(f"--out {out} is a file, not a results store; barsweep never "
                               f"replaces it: choose another path")
        attrs = store_attrs(out)
        if attrs is None:
            if any(out.iterdir()):
                raise ResultsError(f"--out {out} exists and is not a barsweep results store; "
                                   f"barsweep never replaces it: choose another path")
            if resume:
                raise ResultsError(f"--resume: {out} is empty, there is no run to resume")
        elif not (overwrite or resume):
            pending, total = store_status(str(out))
            state = ("complete" if not pending
                     else f"incomplete: {pending} of {total} blocks missing")
            raise ResultsError(f"--out {out} holds the results of an earlier run ({state}); "
                               f"pass --overwrite to replace it or --resume to continue it")
        if os.path.ismount(out):
            raise ResultsError(f"--out {out} is a mount point; a results store is replaced "
                               f"by renaming, so give a path inside it")
        _check_writable(out.parent, str(out))  # the store is made beside it, then renamed
        if resume:
            _check_writable(out, str(out))
        return str(out)
    if resume:
        raise ResultsError(f"--resume: no results store at {out} to resume")
    ancestor = out.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ResultsError(f"--out {out}: {ancestor} is a file, so nothing can be made "
                           f"inside it; choose another path")
    _check_writable(ancestor, str(out))
    return str(out)


def _check_writable(directory: Path, out: str) -> None:
    """Raise ResultsError unless a directory can really be made in ``directory``."""
    try:
        probe = tempfile.mkdtemp(prefix=".barsweep-probe-", dir=directory)
        os.rmdir(probe)
    except OSError as err:
        raise ResultsError(f"--out {out}: cannot write in {directory} "
                           f"({err.strerror or err})") from None


#: A results store up to this size (metrics, segment sums, flags, coordinates) is read
#: into memory when opened; a larger one stays lazy (dask arrays over its chunks).
EAGER_BYTES = 256 << 20


def check_store(path: str, partial: bool) -> int:
    """The pending blocks of the results store at ``path``, after refusing
    (ResultsError, one line) a path that is not a barsweep results store, an
    incomplete store unless ``partial`` (naming how many blocks are missing and the
    command that resumes it), and a store missing an array or a chunk that a computed
    block wrote (:func:`~.integrity.check_integrity`, naming it)."""
    if not Path(path).exists():
        raise ResultsError(f"no results store at {path}")
    attrs = store_attrs(path)
    if attrs is None:
        raise ResultsError(f"{path} is not a barsweep results store (no barsweep group "
                           f"metadata in {Path(path) / 'zarr.json'})")
    flags = done_flags(path)
    pending = int(np.count_nonzero(flags == PENDING))
    if pending and not partial:
        total = int(np.count_nonzero(flags != EXCLUDED))
        raise ResultsError(f"{path} is incomplete: {pending} of {total} blocks missing; "
                           f"finish it with `{resume_hint(path, attrs)}`, or pass --partial "
                           f"to read what is there")
    check_integrity(path, flags)
    return pending


def open_results(path: str | os.PathLike, *, partial: bool = False):
    """Open a results store with xarray (an ``xarray.Dataset``): read into memory when it
    holds at most :data:`EAGER_BYTES`, else lazily (dask arrays over its chunks).

    Refuses (ResultsError, one line) a path that is not a barsweep results store, and an
    incomplete store (blocks still pending: an interrupted or failed run) unless
    ``partial``, naming how many blocks are missing and the command that resumes it.
    """
    import xarray as xr

    path = os.fspath(path)
    pending = check_store(path, partial)
    with reading(path):  # a chunk that fails its checksum: one line naming it
        ds = xr.open_zarr(path, consolidated=False, chunks=None)  # lazy, without dask
        if ds.nbytes <= EAGER_BYTES:  # read at once: no task graph behind every later step
            ds = ds.load()
        else:
            ds = xr.open_zarr(path, consolidated=False)
    ds = ds[[*(m for m in METRICS if m in ds), *(v for v in ds.data_vars if v not in METRICS)]]
    if pending:  # a block cut short may have written some metrics before its flag: hide them
        mask = xr.DataArray(done_mask(path), dims=ds[METRICS[0]].dims)
        ds = ds.assign({name: ds[name].where(mask)  # segment sums broadcast over segment
                        for name in (*METRICS, *SEGMENT_SUMS) if name in ds})
        ds = ds.assign({name: ds[name].where(mask.isel(symbol=0, drop=True))  # a portfolio's
                        for name in MEMBER_VARS if name in ds})
    return ds
