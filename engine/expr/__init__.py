"""The expression core: one reader and one refusal for every expression of barsweep.

Grid constraints (``fast < slow``), result filters (``rank --where``) and strategy rules
are all read by :class:`~.read.Reader` (:mod:`ast`, never ``eval``, through one whitelist
and one table of operators) into trees of :class:`~.read.Node`, and refused in one form:
where the text comes from and what is wrong at which column, then the text with carets
under the fault (:func:`~.read.caret`). The rule language
(:mod:`barsweep.engine.rules.parse`) is a dialect of it; constraints and filters take
the core as it is (:mod:`barsweep.pipeline.config.expr`). Conditions are evaluated over
whole arrays by :mod:`.arrays`: a block's combos masked by its constraints.
"""

from .arrays import UFUNCS, evaluate, holds, program
from .read import ARITHMETIC, COMPARISONS, ExprError, Node, Reader, caret


def read_expr(text: str, where: str, *, strings: bool = False) -> Node:
    """The tree of a condition of the core language.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"2 <= fast < slow and stop < 0.1"``.
    where : str
        The head of a refusal (where the text comes from).
    strings : bool, default False
        Accept quoted strings compared with ``==`` or ``!=`` to a name.

    Raises
    ------
    ExprError
        Naming what is wrong, with a caret under it.

    Examples
    --------
    >>> tree = read_expr("fast < slow", "constraint")
    >>> tree.kind, tree.value, [a.value for a in tree.args]
    ('cmp', '<', ['fast', 'slow'])
    """
    return Reader(text, where, strings).parse()


__all__ = ["ARITHMETIC", "COMPARISONS", "UFUNCS", "ExprError", "Node", "Reader", "caret",
           "evaluate", "holds", "program", "read_expr"]
