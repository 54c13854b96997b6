"""The examples in the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("barsweep", "barsweep.datasets", "barsweep.engine", "barsweep.engine.expr",
            "barsweep.engine.strategies", "barsweep.pipeline")
MODULES = sorted({*PACKAGES, *(m.name for p in PACKAGES for m in pkgutil.iter_modules(
    importlib.import_module(p).__path__, f"{p}.") if not m.ispkg)})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
