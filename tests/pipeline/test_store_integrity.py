"""A results store whose chunks were deleted or damaged is refused in one line, and
``--resume`` recomputes the blocks that lost them.

Real stores made by ``barsweep run`` on a threads cluster, then damaged on disk as a
user, a full disk or a sync tool would: a metric chunk deleted, bytes flipped, a chunk
truncated, a variable's folder deleted, an array's ``zarr.json`` truncated.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from helpers.compare import assert_same_store

from barsweep.errors import ResultsError
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.integrity import WRITTEN, crc_ok
from barsweep.pipeline.run.results import EXCLUDED, done_flags, open_results, store_attrs

N_BARS = 800


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    """A complete store (3 x 2 blocks, one excluded by the constraints) and its spec."""
    root = tmp_path_factory.mktemp("integrity")
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars",
                 str(N_BARS), "--seed", "3", "--store", str(root / "bars")]) == 0
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(root / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": [5, 8, 11, 14, 60, 70], "slow": [20, 30, 40, 50]},
        "constraints": ["fast < slow"],
        "run": {"out": str(root / "results.zarr"), "block_size": 4},
    }))
    assert main(["run", str(spec), "--cluster", "threads", "--workers", "1", "--quiet"]) == 0
    out = root / "results.zarr"
    assert (done_flags(str(out)) == EXCLUDED).any()  # never written by design: no refusal
    return spec, out


@pytest.fixture
def store(complete, tmp_path):
    """A copy of the complete store to damage, and its spec pointing at the copy."""
    spec, out = complete
    copy = tmp_path / "results.zarr"
    shutil.copytree(out, copy)
    text = yaml.safe_load(spec.read_text())
    text["run"]["out"] = str(copy)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(text))
    return copy


def a_chunk(store: Path, name: str = "sharpe") -> Path:
    """The first chunk file of variable ``name`` that a computed block wrote."""
    files = sorted(p for p in (store / name / "c").rglob("*") if p.is_file())
    assert files
    return files[0]


def one_line(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def readers(store: Path, tmp_path: Path) -> list[tuple[list[str], Path | None]]:
    """Each reading command with the file it would write."""
    return [
        (["rank", str(store), "--by", "dsr"], None),
        (["rank", str(store), "--json"], None),
        (["report", str(store), "--out", str(tmp_path / "r.html")], tmp_path / "r.html"),
        (["plot", "heatmap", str(store), "--x", "fast", "--y", "slow", "--out",
          str(tmp_path / "h.png")], tmp_path / "h.png"),
    ]


def assert_every_reader_refuses(store: Path, tmp_path: Path, capsys, *needles: str) -> None:
    for argv, written in readers(store, tmp_path):
        assert main(argv) == 2, argv
        one_line(capsys, "barsweep: error:", str(store), *needles)
        assert written is None or not written.exists(), argv


def test_the_complete_store_reads_and_every_chunk_carries_a_checksum(complete, tmp_path,
                                                                   capsys):
    _, out = complete
    for argv, written in readers(out, tmp_path):
        assert main(argv) == 0, argv
        assert written is None or written.exists()
    capsys.readouterr()
    meta = json.loads((out / "sharpe" / "zarr.json").read_text())
    assert meta["codecs"][-1]["name"] == "crc32c"
    assert all(crc_ok(p.read_bytes()) for p in (out / "sharpe" / "c").rglob("*")
               if p.is_file())


def test_a_deleted_chunk_is_refused_and_resume_recomputes_its_block(complete, store,
                                                                    tmp_path, capsys):
    chunk = a_chunk(store)
    key = chunk.relative_to(store).as_posix()
    chunk.unlink()
    assert_every_reader_refuses(store, tmp_path, capsys, f"chunk {key} of block",
                                "is missing")
    with pytest.raises(ResultsError, match=f"chunk {key} of block"):
        open_results(store)
    n_computed = int((done_flags(str(store)) == 1).sum())
    assert main(["run", str(tmp_path / "spec.yaml"), "--resume", "--cluster", "threads",
                 "--workers", "1"]) == 0
    said = capsys.readouterr().out
    assert "1 block(s) of" in said and "have missing or damaged chunks" in said
    assert f"{n_computed - 1} of {n_computed} blocks already done, 1 to compute" in said
    assert store_attrs(store)["blocks_resumed"] == n_computed - 1
    assert_same_store(store, complete[1])
    assert main(["rank", str(store), "--by", "dsr"]) == 0


def test_a_chunk_with_flipped_bytes_is_refused_and_resume_recomputes_it(complete, store,
                                                                        tmp_path, capsys):
    chunk = a_chunk(store)
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    key = chunk.relative_to(store).as_posix()
    assert_every_reader_refuses(store, tmp_path, capsys, f"chunk {key} of block",
                                "is damaged (its checksum fails)", "--resume")
    assert main(["run", str(tmp_path / "spec.yaml"), "--resume", "--cluster", "threads",
                 "--workers", "1", "--quiet"]) == 0
    assert_same_store(store, complete[1])


def test_a_truncated_chunk_is_refused(store, tmp_path, capsys):
    chunk = a_chunk(store)
    chunk.write_bytes(chunk.read_bytes()[:7])
    key = chunk.relative_to(store).as_posix()
    assert_every_reader_refuses(store, tmp_path, capsys, f"chunk {key} of block",
                                "is damaged")


def test_a_deleted_variable_folder_is_refused(store, tmp_path, capsys):
    shutil.rmtree(store / "sortino")
    assert_every_reader_refuses(store, tmp_path, capsys,
                                "the array sortino is missing (no sortino/zarr.json)")
    assert main(["run", str(tmp_path / "spec.yaml"), "--resume", "--cluster", "threads",
                 "--workers", "1"]) == 2
    one_line(capsys, "the array sortino is missing", "--overwrite")


@pytest.mark.parametrize("name", ["sharpe", "fast", WRITTEN])
def test_a_truncated_array_metadata_is_refused(store, tmp_path, capsys, name):
    meta = store / name / "zarr.json"
    meta.write_bytes(meta.read_bytes()[:40])
    assert_every_reader_refuses(store, tmp_path, capsys,
                                f"the metadata of the array {name} ({name}/zarr.json) is "
                                f"damaged")


def edit_meta(store: Path, name: str, edit) -> None:
    """Rewrite ``name/zarr.json`` of ``store`` as ``edit`` changes its parsed JSON: valid
    JSON that says something else, as a hand or a tool editing a store would leave it."""
    path = store / name / "zarr.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(("name", "edit", "said"), [
    ("sharpe", lambda m: m["codecs"].pop(), "the array sharpe has lost its checksum codec"),
    ("sharpe", lambda m: m["shape"].__setitem__(-1, m["shape"][-1] + 1),
     "of the array sharpe does not match its dims"),
    ("sharpe", lambda m: m.update(data_type="float32"),
     "the array sharpe has another data type or chunk grid than a block writes"),
    ("sortino", lambda m: m["chunk_grid"]["configuration"]["chunk_shape"].__setitem__(-1, 1),
     "the array sortino has another data type or chunk grid than a block writes"),
    (WRITTEN, lambda m: m["attributes"].clear(),
     f"the record of its arrays (the attributes of {WRITTEN}/zarr.json) is missing"),
])
def test_edited_array_metadata_is_refused(store, tmp_path, capsys, name, edit, said):
    edit_meta(store, name, edit)
    assert_every_reader_refuses(store, tmp_path, capsys, said)
    assert main(["run", str(tmp_path / "spec.yaml"), "--resume", "--cluster", "threads",
                 "--workers", "1"]) == 2
    one_line(capsys, said, "--overwrite")


def test_a_deleted_coordinate_chunk_is_refused(store, tmp_path, capsys):
    (store / "slow" / "c" / "0").unlink()
    assert_every_reader_refuses(store, tmp_path, capsys,
                                "chunk slow/c/0 of the coordinate slow is missing")


def test_a_deleted_block_record_is_refused(store, tmp_path, capsys):
    flags = done_flags(str(store))
    block = int(np.flatnonzero(flags == 1)[0])
    (store / WRITTEN / "c" / str(block)).unlink()
    assert_every_reader_refuses(store, tmp_path, capsys, f"block {block} is flagged done")


def test_a_store_of_the_earlier_layout_is_read_unchecked(store, tmp_path, capsys, caplog):
    """A store written before the checks (layout 1: no ``written``, no checksums) reads
    as it always did."""
    group = zarr.open_group(str(store), mode="r+")
    group.attrs["barsweep_results"] = 1
    shutil.rmtree(store / WRITTEN)
    assert main(["rank", str(store), "--by", "dsr"]) == 0
    capsys.readouterr()
    notes = [r.getMessage() for r in caplog.records if "earlier barsweep" in r.getMessage()]
    assert len(notes) == 1 and "read unchecked" in notes[0], notes


def test_a_search_store_resumed_after_a_lost_chunk_equals_the_undamaged_one(complete,
                                                                             tmp_path,
                                                                             capsys):
    """A halving search's rungs write the same chunks: each block that wrote a lost
    chunk runs again, in rung order, and the store ends as the undamaged one."""
    spec, _ = complete
    text = yaml.safe_load(spec.read_text())
    text["grid"] = {"fast": {"start": 2, "stop": 30, "step": 1},
                    "slow": {"start": 10, "stop": 60, "step": 2}}
    text["search"] = {"method": "halving", "budget": 120, "seed": 7, "eta": 2, "rungs": 2}
    text["run"] = {"out": str(tmp_path / "search.zarr"), "block_size": 40}
    (tmp_path / "search.yaml").write_text(yaml.safe_dump(text))
    run = ["run", str(tmp_path / "search.yaml"), "--cluster", "threads", "--workers", "1",
           "--quiet"]
    assert main(run) == 0
    undamaged = tmp_path / "undamaged.zarr"
    shutil.copytree(tmp_path / "search.zarr", undamaged)
    chunk = a_chunk(tmp_path / "search.zarr", "bars_run")
    chunk.unlink()
    assert main(["rank", str(tmp_path / "search.zarr")]) == 2
    one_line(capsys, f"chunk {chunk.relative_to(tmp_path / 'search.zarr').as_posix()} of "
                     f"block", "is missing")
    assert main([*run, "--resume"]) == 0
    assert_same_store(tmp_path / "search.zarr", undamaged)
