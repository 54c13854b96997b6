"""Whether a results store holds whole what its blocks wrote.

Every array of a store (layout 2 on) ends its codecs with zarr's ``crc32c``: the last
4 bytes of each chunk file are the CRC-32C of the rest, which zarr verifies as it
decodes the chunk. Each block records in the ``written`` variable (one count per block,
written before its ``done`` flag) how many chunks it wrote, one of each variable that
blocks write, empty or not; the attributes of ``written`` name those variables
(``block_vars``), the coordinates (``coords``, written whole when the store is made)
and every array of the store (``arrays``). A chunk that is absent
was then either never written by design (its block excluded by the constraints, or
pending) or lost, and the flags tell which.

Readers check, before they read (:func:`check_integrity`: the arrays' metadata and a
listing of the chunk files, no chunk read), and turn a chunk that fails to decode as
they read it into one line naming it (:func:`reading`, :func:`damaged_chunk`).
``barsweep run --resume`` recomputes the blocks :func:`broken_blocks` names.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import math
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import BarsweepError, ResultsError

#: A block's ``done`` flag: pending, computed, or excluded by the constraints.
PENDING, COMPUTED, EXCLUDED = 0, 1, 2

#: The per-block count of chunks written, and the layout that has it.
WRITTEN = "written"
CHECKED_LAYOUT = 2


def done_flags(path: str | os.PathLike) -> np.ndarray:
    """The ``done`` flag of every block (ResultsError when the store has none)."""
    import zarr

    try:
        return zarr.open_group(str(path), mode="r")["done"][:]
    except (KeyError, OSError, ValueError, zarr.errors.BaseZarrError) as err:
        raise ResultsError(f"{path} is a damaged results store: its block flags cannot be "
                           f"read ({type(err).__name__}: {err})") from None


def resume_hint(path: str, attrs: Mapping | None) -> str:
    """The command that finishes the run of the store at ``path``."""
    spec = (attrs or {}).get("spec_path") or "SPEC.yaml"
    return f"barsweep run {shlex.quote(spec)} --out {shlex.quote(str(path))} --resume"


@dataclass(frozen=True)
class Problem:
    """A chunk, or an array, that is missing or damaged; ``block`` is the block that
    wrote it (-1: not a block's)."""

    what: str
    block: int = -1

    def line(self, path: str | os.PathLike, more: int = 0, resuming: bool = False) -> str:
        """The one line of a refusal (``more``: how many other problems were found)."""
        rest = f" (and {more} more)" if more else ""
        if resuming:
            return (f"--resume: {path} is a damaged results store: {self.what}{rest}; a "
                    f"block cannot mend that: run it again with --overwrite")
        fix = (f"recompute its block with `{resume_hint(str(path), _group_attrs(path))}`"
               if self.block >= 0 else "run it again with --overwrite")
        return f"{path} is a damaged results store: {self.what}{rest}; {fix}"


def read_meta(path: str | os.PathLike, name: str) -> dict | None:
    """The metadata (``zarr.json``) of array ``name`` of the store at ``path``, or None
    when it is missing or does not parse as a Zarr v3 array's."""
    try:
        doc = json.loads((Path(path) / name / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("node_type") != "array":
        return None
    return doc


def metadata_problem(path: str | os.PathLike, name: str) -> str:
    """What is wrong with the metadata of array ``name``, which :func:`read_meta`
    could not read."""
    if not (Path(path) / name / "zarr.json").is_file():
        return f"the array {name} is missing (no {name}/zarr.json)"
    return f"the metadata of the array {name} ({name}/zarr.json) is damaged"


def store_index(path: str | os.PathLike) -> dict | None:
    """The attributes of ``written`` (``block_vars``, ``coords``, ``arrays``) of a
    store of the checked layout; None for a store written before it (unchecked)."""
    group = _group_attrs(path)
    if int(group.get("barsweep_results", 0) or 0) < CHECKED_LAYOUT:
        return None
    meta = read_meta(path, WRITTEN)
    if meta is None:
        raise ResultsError(Problem(metadata_problem(path, WRITTEN)).line(path))
    return meta.get("attributes", {})


def _group_attrs(path: str | os.PathLike) -> dict:
    try:
        doc = json.loads((Path(path) / "zarr.json").read_text(encoding="utf-8"))
        return doc.get("attributes", {}) if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def chunk_key(meta: dict, coords: Sequence[int]) -> str:
    """The key (path under the array's folder) of the chunk at ``coords``."""
    encoding = meta.get("chunk_key_encoding", {})
    sep = encoding.get("configuration", {}).get("separator", "/")
    if encoding.get("name", "default") == "v2":
        return sep.join(map(str, coords)) or "0"
    return sep.join(["c", *map(str, coords)])


def grid_counts(meta: dict) -> tuple[int, ...]:
    """The number of chunks along each dim of the array ``meta`` describes."""
    chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
    return tuple(-(-n // c) for n, c in zip(meta["shape"], chunks, strict=True))


def block_keys(metas: dict[str, dict], block: int, grid: tuple[int, ...],
               dims: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(variable, chunk key)`` of every chunk block ``block`` writes: its position in
    the metrics' chunk grid ``grid`` over ``dims`` (a search's later rungs' blocks write
    the chunks of rung 0's), 0 along a dim a variable holds in one chunk (``segment``,
    ``member``)."""
    at = dict(zip(dims, np.unravel_index(block % math.prod(grid), grid), strict=True))
    for name, meta in metas.items():
        names = meta.get("dimension_names") or ()
        yield name, chunk_key(meta, [int(at.get(d, 0)) for d in names])


def chunk_files(path: str | os.PathLike, name: str) -> set[str]:
    """The chunk keys present under array ``name`` (a directory listing, nothing read)."""
    root = Path(path) / name
    found = set()
    for folder, _, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        for f in files:
            if f != "zarr.json" or rel != ".":
                found.add(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
    return found


def missing(path: str | os.PathLike, flags: np.ndarray, index: dict,
            written: np.ndarray) -> list[Problem]:
    """What the computed blocks (``flags``) wrote that is not there: an array without
    its metadata, a chunk file, or a block's record (``written``, a count short of its
    variables). A listing of the store's folders; no chunk is read."""
    problems = [Problem(metadata_problem(path, name))
                for name in index.get("arrays", []) if read_meta(path, name) is None]
    if problems:
        return problems
    problems = [Problem(what) for what in odd_arrays(path, index)]
    if problems:
        return problems
    problems = [Problem(f"chunk {name}/{key} of the coordinate {name} is missing")
                for name in index.get("coords", []) for key in absent_chunks(path, name)]
    metas = {name: read_meta(path, name) for name in index.get("block_vars", [])}
    if not metas:
        return problems
    first = next(iter(metas.values()))
    dims, grid = first.get("dimension_names") or (), grid_counts(first)
    present = {name: chunk_files(path, name) for name in metas}
    for block in np.flatnonzero(flags == COMPUTED).tolist():
        for name, key in block_keys(metas, block, grid, dims):
            if key not in present[name]:
                problems.append(Problem(f"chunk {name}/{key} of block {block} is missing",
                                        block))
        if block < len(written) and written[block] != len(metas):
            problems.append(Problem(f"block {block} is flagged done but its record says it "
                                    f"wrote {written[block]} of {len(metas)} chunks", block))
    return problems


def odd_arrays(path: str | os.PathLike, index: dict) -> list[str]:
    """What the metadata of the store's arrays says that a results store's does not,
    though it parses: a record (``index``) without its lists, an array without the
    checksum codec the others have, a shape that disagrees with its dims' coordinates,
    or a variable of the blocks with another data type or chunk grid than the first's."""
    if not all(isinstance(index.get(key), list) for key in ("arrays", "block_vars", "coords")):
        return [f"the record of its arrays (the attributes of {WRITTEN}/zarr.json) is "
                f"missing or damaged"]
    metas = {name: read_meta(path, name) for name in index["arrays"]}
    unsummed = [name for name, meta in metas.items()
                if not any(isinstance(c, dict) and c.get("name") == "crc32c"
                           for c in meta.get("codecs", []))]
    # every array without: a copy written again by xarray or zarr (its chunks match its
    # metadata, and are read as they are); some: an array's metadata edited
    found = ([] if len(unsummed) == len(metas) else
             [f"the array {name} has lost its checksum codec ({name}/zarr.json)"
              for name in unsummed])
    lengths = {name: meta["shape"][0] for name, meta in metas.items()
               if name in index["coords"] and meta.get("dimension_names") == [name]}
    for name, meta in metas.items():
        dims, shape = meta.get("dimension_names") or [], meta.get("shape") or []
        if len(dims) != len(shape) or any(n != lengths.get(d, n) for d, n in zip(dims, shape)):
            found.append(f"the shape {shape} of the array {name} does not match its dims "
                         f"{dims} ({name}/zarr.json)")
    block_vars = [metas[name] for name in index["block_vars"] if name in metas]
    if block_vars:
        first = block_vars[0]
        chunks = dict(zip(first.get("dimension_names") or [],
                          first["chunk_grid"]["configuration"]["chunk_shape"]))
        for name in index["block_vars"]:
            meta = metas[name]
            own = zip(meta.get("dimension_names") or [],
                      meta["chunk_grid"]["configuration"]["chunk_shape"], meta["shape"])
            if meta.get("data_type") != "float64" or any(
                    c != chunks.get(d, n) for d, c, n in own):
                found.append(f"the array {name} has another data type or chunk grid than "
                             f"a block writes ({name}/zarr.json)")
    return found


def absent_chunks(path: str | os.PathLike, name: str) -> list[str]:
    """The chunk keys of array ``name`` that are not on disk (a coordinate is written
    whole when the store is made, every chunk of it)."""
    meta = read_meta(path, name)
    present = chunk_files(path, name)
    return [key for coords in itertools.product(*map(range, grid_counts(meta)))
            if (key := chunk_key(meta, coords)) not in present]


def crc_ok(data: bytes) -> bool:
    """Whether ``data`` ends with the CRC-32C (little-endian) of what precedes it."""
    import google_crc32c

    return len(data) >= 4 and google_crc32c.value(data[:-4]) == int.from_bytes(data[-4:],
                                                                              "little")


def damaged(path: str | os.PathLike, index: dict, flags: np.ndarray | None = None,
            first_only: bool = False) -> list[Problem]:
    """The chunk files of the store whose checksum fails (truncated or altered), each
    read whole: every array's, or with ``flags`` those of computed blocks (and of the
    arrays no block writes)."""
    problems = []
    block_of: dict[tuple[str, str], int] = {}
    block_vars = set(index.get("block_vars", []))
    if flags is not None:
        metas = {name: read_meta(path, name) for name in index.get("block_vars", [])}
        first = next(iter(metas.values()), None)
        if first is not None:
            dims, grid = first.get("dimension_names") or (), grid_counts(first)
            for block in np.flatnonzero(flags == COMPUTED).tolist():
                block_of.update({nk: block for nk in block_keys(metas, block, grid, dims)})
    for name in index.get("arrays", []):
        meta = read_meta(path, name)
        if meta is None or not any(c.get("name") == "crc32c" for c in meta.get("codecs", [])):
            continue
        for key in sorted(chunk_files(path, name)):
            if flags is not None and name in block_vars and (name, key) not in block_of:
                continue  # a pending or excluded block's: read by no one
            if not crc_ok((Path(path) / name / key).read_bytes()):
                block = block_of.get((name, key), -1)
                of = f" of block {block}" if block >= 0 else ""
                problems.append(Problem(f"chunk {name}/{key}{of} is damaged (its checksum "
                                        f"fails)", block))
                if first_only:
                    return problems
    return problems


@contextlib.contextmanager
def odd_metadata(path: str | os.PathLike) -> Iterator[None]:
    """Run the body; metadata that parses but does not say what a results store's
    says (a shape, chunks, attributes of the wrong type) is ResultsError, one line."""
    try:
        yield
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        raise ResultsError(Problem(f"its arrays' metadata does not describe a results "
                                   f"store ({type(err).__name__}: {err})").line(path)) from None


def check_integrity(path: str | os.PathLike, flags: np.ndarray) -> None:
    """Refuse (ResultsError, one line naming the first) a store whose computed blocks'
    chunks are not all there (:func:`missing`); a store written before the checked
    layout is read as it is."""
    index = store_index(path)
    if index is None:
        note_unchecked(os.path.abspath(path))
        return
    with odd_metadata(path):
        problems = missing(path, flags, index, _written(path))
    if problems:
        raise ResultsError(problems[0].line(path, len(problems) - 1))


@functools.lru_cache(maxsize=64)  # said once per store and process
def note_unchecked(path: str) -> None:
    """Say (the ``barsweep`` log, a line on the command line's stderr) that the store
    at ``path`` is read unchecked."""
    logging.getLogger(__name__).warning(
        "barsweep: note: %s was written by an earlier barsweep, without checksums or the "
        "blocks' records: read unchecked (a run with --overwrite writes a checked one)", path)


def _written(path: str | os.PathLike) -> np.ndarray:
    """The ``written`` counts (0 where a block's record is missing)."""
    import zarr

    try:
        return zarr.open_array(str(Path(path) / WRITTEN), mode="r")[:]
    except (KeyError, OSError, ValueError, zarr.errors.BaseZarrError):
        raise ResultsError(Problem(f"the array {WRITTEN} (each block's record) cannot be "
                                   f"read").line(path)) from None


def damaged_chunk(path: str | os.PathLike) -> str | None:
    """The one line saying what is missing or damaged in the store at ``path`` (None:
    nothing is, or it is no store of the checked layout): its metadata, its chunk
    files, then every chunk's checksum (each file read)."""
    try:
        index = store_index(path)
        if index is None:
            return None
        flags = done_flags(path)
        with odd_metadata(path):
            problems = (missing(path, flags, index, _written(path))
                        or damaged(path, index, flags, first_only=True))
    except BarsweepError as err:
        return str(err)
    return problems[0].line(path) if problems else None


@contextlib.contextmanager
def reading(path: str | os.PathLike | None) -> Iterator[None]:
    """Run the body, which reads the store at ``path``; an error it raises that is not
    barsweep's own (a chunk that fails its checksum or to decompress, an array that
    cannot be opened) is turned into ResultsError, one line naming what is damaged,
    when the store has damage (:func:`damaged_chunk`), and raised as it is otherwise."""
    try:
        yield
    except BarsweepError:
        raise
    except Exception:
        line = None if path is None or not Path(path).is_dir() else damaged_chunk(path)
        if line is None:
            raise
        raise ResultsError(line) from None


def broken_blocks(path: str | os.PathLike, flags: np.ndarray) -> tuple[list[int], Problem | None]:
    """The computed blocks whose chunks are missing or damaged (every chunk read), and
    a problem that no block can mend (an array's metadata), if any; nothing for a store
    written before the checked layout."""
    index = store_index(path)
    if index is None:
        return [], None
    with odd_metadata(path):
        problems = missing(path, flags, index, _written(path))
        unmendable = next((p for p in problems if p.block < 0), None)
        if unmendable is not None:
            return [], unmendable
        problems += damaged(path, index, flags)
        unmendable = next((p for p in problems if p.block < 0), None)
        blocks = {p.block for p in problems if p.block >= 0}
        return sharing(path, index, flags, blocks), unmendable


def sharing(path: str | os.PathLike, index: dict, flags: np.ndarray,
            blocks: set[int]) -> list[int]:
    """The computed blocks that write the chunks of ``blocks`` (a search's rungs write
    the same chunks; in other stores each block its own)."""
    if not blocks:
        return []
    first = read_meta(path, index["block_vars"][0])
    n = math.prod(grid_counts(first))
    chunks = {b % n for b in blocks}
    return [b for b in np.flatnonzero(flags == COMPUTED).tolist() if b % n in chunks]


def reopen_broken(path: str) -> list[int]:
    """Flag pending again the computed blocks whose chunks are missing or damaged
    (:func:`broken_blocks`: every chunk of a computed block read), so that a resumed
    run recomputes them; their ids. ResultsError, one line, for damage that no block
    mends (an array's metadata, a coordinate's chunk)."""
    import zarr

    flags = done_flags(path)
    blocks, unmendable = broken_blocks(path, flags)
    if unmendable is not None:
        raise ResultsError(unmendable.line(path, resuming=True))
    if blocks:
        flags[blocks] = PENDING
        group = zarr.open_group(path, mode="r+")
        group["done"][:] = flags
        group.attrs["complete"] = False
    return blocks
