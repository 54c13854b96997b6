"""Sizes in bytes as a spec writes them (``2GiB``) and as a person reads them."""

from __future__ import annotations

import re

from ...errors import SpecError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20,
          "gib": 2**30, "tib": 2**40}


def parse_bytes(value, key: str = "run.memory_per_block") -> int:
    """Bytes from an int or a string such as ``"2GiB"``, ``"500 MB"``, ``"1e9"``;
    SpecError naming ``key`` for anything else or a size not above zero.

    >>> parse_bytes("2GiB"), parse_bytes(1000), parse_bytes("1.5 kb")
    (2147483648, 1000, 1500)
    """
    if isinstance(value, bool):
        raise SpecError(f"{key} must be a size in bytes or such as '2GiB', got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", str(value))
        unit = match and match.group(2).lower()
        try:
            number = int(float(match.group(1)) * _UNITS[unit]) if match else None
        except (KeyError, ValueError):
            number = None
        if number is None:
            raise SpecError(f"{key} must be a size in bytes or such as '2GiB', got {value!r}")
    if number <= 0:
        raise SpecError(f"{key} must be above 0 bytes, got {value!r}")
    return number


def size_text(n: int) -> str:
    """``n`` bytes for a person: ``'1.5 GiB'``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
