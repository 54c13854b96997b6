"""``python -m barsweep.pipeline.cli``: the ``barsweep`` command."""

import sys

from . import main

sys.exit(main())
