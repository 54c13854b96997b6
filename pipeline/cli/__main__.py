"""``python -m barsweep.pipeline.cli``: the ``barsweep`` command."""

import sys

from . import command

sys.exit(command())
