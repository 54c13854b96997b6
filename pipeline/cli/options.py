"""Options several commands share, declared once."""

from __future__ import annotations

import argparse


def add_import_modules(parser: argparse.ArgumentParser) -> None:
    """``--import-modules``: a results store's strategy modules are imported only when
    the user asks, and only when their sources are the ones the run hashed
    (:func:`barsweep.pipeline.run.store_modules.import_store_modules`)."""
    parser.add_argument("--import-modules", action="store_true",
                        help="import the strategy modules the store's spec names (Python "
                        "code on this machine), checked against the run's hashes of their "
                        "sources; without it, nothing the store names is imported")
