"""Regenerate tests/golden/pinned_metrics.json and print what changed.

Run from the repository root: ``python tests/golden/make_pins.py``. Review the diff
it prints (cases added/removed, metrics that moved by more than 1e-9 relative) before
committing the new file: a change means the engine's results changed. The pins are the
engine's own output (a regression record), never evidence that the results are right.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as under pytest

from golden.cases import (  # noqa: E402
    CASES,
    PINS_PATH,
    case_id,
    case_key,
    changed_metrics,
    decode,
    read_pins,
    record,
    run_case,
    write_pins,
)


def main() -> int:
    entries = [record(case, run_case(case)) for case in CASES]
    if PINS_PATH.exists():
        print(diff_summary(read_pins(PINS_PATH), entries))
    else:
        print(f"no previous {PINS_PATH.name}; writing {len(entries)} cases")
    write_pins(entries)
    print(f"wrote {len(entries)} cases to {PINS_PATH}")
    return 0


def diff_summary(old: dict[str, dict], entries: list[dict]) -> str:
    new = {case_key(e): e for e in entries}
    lines = []
    for key in old.keys() - new.keys():
        lines.append(f"removed: {case_id(old[key])} {key}")
    for key in new.keys() - old.keys():
        lines.append(f"added:   {case_id(new[key])} {key}")
    for key in old.keys() & new.keys():
        metrics = {m: decode(v) for m, v in new[key]["metrics"].items()}
        for line in changed_metrics(old[key]["metrics"], metrics):
            lines.append(f"changed: {case_id(new[key])} {line}")
    if not lines:
        return f"no changes against the previous {PINS_PATH.name} ({len(old)} cases)"
    return "\n".join(sorted(lines))


if __name__ == "__main__":
    sys.exit(main())
