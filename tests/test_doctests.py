"""The examples in the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

#: Every module of the package, its sub-packages' too (``__main__`` runs the CLI).
MODULES = sorted({"barsweep", *(m.name for m in pkgutil.walk_packages(
    importlib.import_module("barsweep").__path__, "barsweep."))}
                 - {"barsweep.pipeline.cli.__main__"})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
