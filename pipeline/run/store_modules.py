"""The strategy modules a results store names: hashed when the run starts, imported when
a reader asks for them by name (``--import-modules``), never otherwise.

A store's spec is data; its ``modules`` and ``module_dir`` name Python files on the
reader's machine. Reading the store (``rank``, ``report``, ``plot``) imports none of them:
the spec is read with :func:`~barsweep.pipeline.config.model.parse_spec`'s
``modules=False``, which refuses a spec whose modules are not imported already. With
``--import-modules`` the CLI calls :func:`import_store_modules` first: each module's
sources are hashed again (:func:`module_digest`, as a run ships them) and imported
only when they are the files the run hashed (the store's ``modules_sha256``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ...engine.strategies import import_strategy_module, module_location
from ...errors import ResultsError
from ..config.files import load_yaml
from .results import store_attrs
from .shipping import files_digest, module_files

#: The store attribute holding ``{module: sha256 of its sources}``.
MODULES_ATTR = "modules_sha256"


def module_digest(name: str, root: str | None) -> str | None:
    """sha256 of the files of ``name``'s top-level package or module in ``root``, as a run
    ships them to workers (:func:`~.shipping.module_files`); None when ``root`` holds
    neither."""
    if root is None or module_location(name, root) is None:
        return None
    return files_digest(module_files(root, [name.partition(".")[0]]))


def modules_record(modules: list[str], module_dir: str | None) -> str:
    """The run's :data:`MODULES_ATTR`: each module's digest in ``module_dir`` (None for a
    module found on ``sys.path`` instead), as JSON."""
    return json.dumps({name: module_digest(name, module_dir) for name in modules})


def import_store_modules(path: str | os.PathLike) -> list[str]:
    """Import the modules the results store at ``path`` names, each checked against the
    digest its run recorded; returns their names.

    Raises
    ------
    ResultsError
        The store records no digests, a module is not where the spec says, or its
        sources differ from the run's (naming the module and the folder).
    """
    attrs = store_attrs(path) or {}
    spec = load_yaml(str(attrs.get("spec") or "{}"), f"{os.fspath(path)}'s spec")
    spec = spec if isinstance(spec, Mapping) else {}
    modules, root = list(spec.get("modules") or []), spec.get("module_dir")
    if not modules:
        return []
    try:
        recorded = json.loads(attrs.get(MODULES_ATTR) or "null")
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        raise ResultsError(f"{os.fspath(path)} records no digests of its modules "
                           f"({', '.join(map(str, modules))}): they cannot be checked, so "
                           "they are not imported; rerun the spec to rebuild its combos")
    for name in modules:
        name = str(name)
        now = module_digest(name, root if isinstance(root, str) else None)
        if now is None:
            raise ResultsError(f"--import-modules: the store names module {name!r} in "
                               f"{root}, which holds no package or file of that name: only "
                               "a module_dir's own modules are imported, checked by hash")
        if name not in recorded or now != recorded[name]:
            where = f"in {root}" if isinstance(root, str) else "on sys.path"
            found = "not found" if now is None else f"sha256 {now[:12]}"
            raise ResultsError(f"--import-modules: module {name!r} {where} is not the one "
                               f"the run of {os.fspath(path)} hashed ({found}, the run's "
                               f"{str(recorded.get(name))[:12]}): not imported")
        import_strategy_module(name, root)
    return modules
