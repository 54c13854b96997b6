"""Reading an expression's text into a typed tree, refusing anything outside the language.

The text is screened (printable ASCII, within :data:`MAX_CHARS`), put on one line for
:func:`ast.parse` (whitespace as spaces; where the dialect says so ``&``/``|`` spelled
``and``/``or``; the leading zeros of numbers dropped), parsed, never evaluated, bounded
(:data:`MAX_NODES`, :data:`MAX_DEPTH`) and walked through a whitelist: every node becomes a
:class:`Node` that knows its type (``num``, ``bool`` or ``str``) and its place in the
text. A refusal is an :class:`ExprError`: one line saying where the text comes from, what
is wrong and at which column, then the line of the text with carets under the part at
fault (:func:`caret`).

:class:`Reader` reads the core every expression shares: decimal numbers, names,
``+ - * /`` (with unary ``-``/``+``), the comparisons ``< <= > >= == !=`` (a chain
``a < b <= c`` means ``a < b and b <= c``), ``and``/``or``/``not`` and parentheses, plus
quoted strings compared with ``==``/``!=`` to a name when asked for (result filters). A
dialect subclasses it: the rule language (:mod:`barsweep.engine.rules.parse`) adds the
series, indicators, lags, ``True``/``False`` and the position state.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

from ...errors import SpecError

__all__ = ["ARITHMETIC", "COMPARISONS", "MAX_CHARS", "MAX_DEPTH", "MAX_NODES", "ExprError",
           "Node", "Reader", "caret", "combine", "instead"]

#: The most characters an expression may have.
MAX_CHARS = 4_000
#: The most nodes (names, numbers, operators, calls) an expression may have.
MAX_NODES = 500
#: The deepest an expression's nesting (operators within operators, calls within calls)
#: may go.
MAX_DEPTH = 100

#: The arithmetic operators: Python's node type and the language's spelling.
ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
#: The comparisons: Python's node type and the language's spelling.
COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}
#: Python's bitwise and/or, which other languages write for and/or.
_LOGIC_OPERATORS = {ast.BitAnd: "&", ast.BitOr: "|"}
#: Python's other operators, named in a refusal.
_OTHER_OPERATORS = {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.BitXor: "^",
                    ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@", ast.In: "in",
                    ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # how a number is written
_WORDS = re.compile(rf"[A-Za-z_]\w*|{_NUMBER.pattern}")  # names and numbers
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")  # a string literal, read as it is
#: Characters the language never uses: its text is printable ASCII, on lines.
_OUTSIDE = re.compile(r"[^\t\n\r -~]|[#\\]")
_INT64_MAX = 2**63 - 1
#: How other languages write the logic (``AND``, ``&&``, ``!``): refused on a text Python
#: cannot parse, saying what to write instead.
_FOREIGN_LOGIC = re.compile(r"\b(?:and|or|not)\b|&&|\|\||!(?!=)", re.IGNORECASE)
_LOGIC_WORDS = {"&&": "and", "||": "or", "!": "not", "&": "and", "|": "or", "~": "not"}
_HINTS = {
    "=": "; use '==' to compare",
    **dict.fromkeys("'\".", "; strings, calls and attributes are not part of the language"),
}
_DESCRIBED = {ast.Call: "a function call", ast.Attribute: "an attribute",
              ast.Subscript: "a subscript", ast.Slice: "a slice", ast.Lambda: "a lambda",
              ast.ListComp: "a comprehension", ast.GeneratorExp: "a comprehension",
              ast.DictComp: "a comprehension", ast.SetComp: "a comprehension",
              ast.IfExp: "`x if c else y`", ast.NamedExpr: "`:=`",
              ast.JoinedStr: "an f-string", ast.List: "a list", ast.Tuple: "a tuple",
              ast.Dict: "a dict", ast.Set: "a set", ast.Starred: "`*`", ast.Await: "await"}
_TYPES = {"num": "a number", "bool": "true/false", "str": "a string"}


class ExprError(SpecError):
    """An expression refused: where it comes from and what is wrong, then its text with
    carets under the part at fault."""


@dataclass(frozen=True)
class Node:
    """One node of an expression: a frozen, hashable, picklable value.

    Two nodes read from two spellings of one expression are equal (their places in
    the text aside).

    Attributes
    ----------
    kind : str
        ``num`` (a number, or ``True``/``False`` of type ``bool``), ``str`` (a quoted
        string), ``name`` (a name, as the core reads it), ``op`` (``+ - * /``), ``neg``,
        ``cmp``, ``and``, ``or``, ``not``; the rule language adds ``col`` (a bar
        column), ``param``, ``state``, ``call`` (an indicator), ``helper`` (``abs min
        max``), ``lag`` and ``cross`` (``cross_above/below``).
    value : object
        The number (an int within int64, else a float), the string, the name, the
        operator; ``(function, output)`` of a call, the helper's name.
    args : tuple of Node
    type : {"num", "bool", "str"}
    bar : bool
        Whether it changes from bar to bar (rules).
    state : bool
        Whether it reads the position state (rules).
    span : (int, int)
        Its place in the text, ``[start, end)``.
    """

    kind: str
    value: object
    args: tuple[Node, ...] = ()
    type: str = "num"
    bar: bool = False
    state: bool = False
    span: tuple[int, int] = field(default=(0, 0), compare=False)


def combine(kind: str, value, args: tuple[Node, ...], type_: str,
            span: tuple[int, int]) -> Node:
    """A node over ``args``: changing from bar to bar, or reading the state, if any
    of them does."""
    return Node(kind, value, args, type_, any(a.bar for a in args),
                any(a.state for a in args), span)


def caret(message: str, text: str, span: tuple[int, int]) -> str:
    """``message`` with the place of ``span`` in ``text`` (its column; its line too
    when ``text`` has several), then that line of ``text`` with carets under ``span``.

    Whitespace is shown as spaces (columns kept), so the carets stand under the text.

    >>> print(caret("cannot parse expression 'a <'", "a <", (3, 4)))
    cannot parse expression 'a <' (column 4)
        a <
           ^
    """
    start, end = span
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    line = "".join(" " if c.isspace() else c for c in text[line_start:line_end])
    column = start - line_start + 1
    place = (f"line {text.count(chr(10), 0, start) + 1}, column {column}" if "\n" in text
             else f"column {column}")
    width = max(1, min(end, line_end) - start)
    return f"{message} ({place})\n    {line}\n    {' ' * (start - line_start)}{'^' * width}"


def instead(written: str, language: str) -> str:
    """What to write for a foreign ``written`` and/or/not."""
    word = _LOGIC_WORDS.get(written, written.lower())
    also = " (`!=` compares)" if written == "!" else ""
    return (f"write `{word}` instead of `{written}`{also}: {language}'s logic is `and`, "
            "`or`, `not`, in lowercase as in Python")


def _unpadded(word: str) -> str:
    """``007`` as ``  7`` (columns kept): the language reads it as 7, Python refuses it."""
    digits = word.lstrip("0")
    return " " * (len(word) - len(digits)) + digits if word.isdigit() and digits else word


class Reader:
    """The walk of one expression's ast: each visitor returns a :class:`Node` or refuses.

    Parameters
    ----------
    text : str
        The expression.
    where : str
        Where it comes from, the head of every refusal (``strategy.rule.entry``,
        ``cannot parse expression 'fast <'``).
    strings : bool, default False
        Accept quoted strings compared with ``==`` or ``!=`` to a name
        (``symbol == 'MSFT'``).

    A dialect sets the class attributes below and adds visitors (``_Call`` for
    :class:`ast.Call`, ...) or overrides :meth:`name`.
    """

    #: The language, as messages name it.
    language = "the expression language"
    #: What one text is, as messages name it.
    noun = "expression"
    #: What a refused node is told the language has.
    summary = (" (it has decimal numbers, names, + - * /, comparisons, and/or/not and "
               "parentheses)")
    #: What to do with a text past the limits.
    advice = "split it"
    #: Whether ``&`` and ``|`` spell ``and`` and ``or`` (with their precedence).
    logic_symbols = True
    #: Whether ``True`` and ``False`` are constants of the language.
    booleans = False
    #: The error a refusal raises.
    error = ExprError

    def __init__(self, text: str, where: str, strings: bool = False) -> None:
        self.text, self.where, self.strings = text, where, strings
        self.source, self.at = "", [0]

    @property
    def a_noun(self) -> str:
        """``a rule``, ``an expression``."""
        return f"{'an' if self.noun[0] in 'aeiou' else 'a'} {self.noun}"

    # ------------------------------------------------------------------ the text

    def parse(self) -> Node:
        """The typed tree of the text, a condition (of type ``bool``).

        Raises
        ------
        ExprError
            (the dialect's :attr:`error`) naming what is wrong, with a caret under it.
        """
        self.screen()
        self.respell()
        try:
            with warnings.catch_warnings():  # '1and' and the like: accepted, whatever -W says
                warnings.simplefilter("ignore")
                tree = ast.parse(self.source, mode="eval")
        except SyntaxError as error:
            self.foreign_logic()
            raise self.syntax_error(error) from None
        except (RecursionError, MemoryError):  # MemoryError: the parser's stack overflowed
            self.fail(f"nested too deeply (at most {MAX_DEPTH} levels)", (0, len(self.text)))
        self.check_size(tree.body)
        node = self.read(tree.body)
        if node.type != "bool":
            self.fail(self.not_a_condition(node), node.span)
        return node

    def not_a_condition(self, node: Node) -> str:
        """What a whole text of type ``num`` (or ``str``) is told."""
        return (f"the {self.noun} is {_TYPES[node.type]}, not a condition: compare it, "
                "e.g. 'fast < slow'")

    def screen(self) -> None:
        """Refuse a text too long, or holding a character the language never uses."""
        text = self.text
        if len(text) > MAX_CHARS:
            raise self.error(f"{self.where}: {self.a_noun} has at most {MAX_CHARS:,} "
                             f"characters, this one {len(text):,}; {self.advice}")
        found = _OUTSIDE.search(text)
        if found is None:
            return
        char = found.group()
        why = {"#": f"comments are not part of {self.language} (write them outside the "
                    f"{self.noun}'s text)",
               "\\": f"a backslash is not part of {self.language} ({self.a_noun} may span "
                     "lines as it is)"}.get(
            char, f"the character {char!r} (U+{ord(char):04X}) is not part of "
                  f"{self.language}, written in ASCII")
        self.fail(why, found.span())

    def respell(self) -> None:
        """Put the text on one line for :func:`ast.parse` as ``self.source``, with
        ``self.at[i]`` the place in the text of column ``i`` of the source."""
        text = self.text
        quoted = set()  # the columns inside string literals: read as they are
        for literal in _QUOTED.finditer(text):
            quoted.update(range(literal.start(), literal.end()))
        unpadded = _WORDS.sub(
            lambda word: word[0] if word.start() in quoted else _unpadded(word[0]), text)
        spellings = {"&": " and ", "|": " or "} if self.logic_symbols else {}
        pieces, at = [], []
        for i, char in enumerate(unpadded):
            piece = char if i in quoted else spellings.get(char, " " if char.isspace()
                                                           else char)
            pieces.append(piece)
            at.extend([i] * len(piece))
        self.source = "".join(pieces).lstrip(" ")
        self.at = at[len(at) - len(self.source):] + [len(text)]

    def foreign_logic(self) -> None:
        """Refuse a text that writes and/or/not as another language does (``AND``,
        ``Or``, ``&&``, ``||``, ``!``), with a caret under the first one; return when it
        has none."""
        for found in _FOREIGN_LOGIC.finditer(self.text):
            written = found.group()
            if written not in ("and", "or", "not"):
                self.fail(instead(written, self.language), found.span())

    def syntax_error(self, error: SyntaxError) -> ExprError:
        """The refusal of a text Python could not parse, at the place it stopped."""
        start = (error.offset or 0) - 1
        if not self.source:
            return self.refusal(f"the {self.noun} is empty", (len(self.text),) * 2)
        if "never closed" in error.msg:
            opened = self.at[max(start, 0)]
            return self.refusal(f"the '(' at {self.place(opened)} is never closed",
                                (len(self.text),) * 2)
        if not 0 <= start < len(self.source):
            return self.refusal(f"unexpected end of the {self.noun}", (len(self.text),) * 2)
        what = self.source[start:max(start + 1, (error.end_offset or 0) - 1)].strip()
        what = what or self.source[start]
        message = f"unexpected {what!r}" if error.msg.startswith("invalid syntax") else (
            error.msg.split(" (detected")[0].split(";")[0])  # Python's hints do not apply
        return self.refusal(message + _HINTS.get(what[0], ""), self.source_span(start))

    def place(self, pos: int) -> str:
        """``column C``, or ``line L, column C``, of the place ``pos`` in the text."""
        column = pos - self.text.rfind("\n", 0, pos)
        if "\n" not in self.text:
            return f"column {column}"
        return f"line {self.text.count(chr(10), 0, pos) + 1}, column {column}"

    def check_size(self, tree: ast.AST) -> None:
        """Refuse a parsed text with more than :data:`MAX_NODES` nodes or nested deeper
        than :data:`MAX_DEPTH` (walked without recursion, before the reader recurses)."""
        count, stack = 0, [(tree, 1)]
        while stack:
            node, depth = stack.pop()
            count += 1
            if depth > MAX_DEPTH:
                self.fail(f"nested too deeply: {self.a_noun} has at most {MAX_DEPTH} levels "
                          "of operators and calls (a sum of n terms is n levels)",
                          self.span(node))
            if count > MAX_NODES:
                raise self.error(f"{self.where}: {self.a_noun} has at most {MAX_NODES} "
                                 "terms (names, numbers, operators, calls); "
                                 f"{self.advice}")
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node)
                         if not isinstance(child, ast.expr_context | ast.operator
                                           | ast.boolop | ast.cmpop | ast.unaryop))

    # ------------------------------------------------------------------ places, refusals

    def source_span(self, start: int, end: int | None = None) -> tuple[int, int]:
        """The place in the text of columns ``[start, end)`` of the source (one column
        when ``end`` is None)."""
        start = min(start, len(self.source))
        end = start + 1 if end is None else max(end, start + 1)
        first = self.at[start]
        return first, (self.at[end - 1] + 1 if end <= len(self.source) else len(self.text))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """The place of ``node`` in the text."""
        return self.source_span(node.col_offset, node.end_col_offset)

    def operator_span(self, left: ast.AST, right: ast.AST) -> tuple[int, int]:
        """Where the operator between ``left`` and ``right`` stands (parentheses aside)."""
        gap = self.source[left.end_col_offset:right.col_offset]
        symbol = gap.strip(" ()")
        start = left.end_col_offset + gap.index(symbol)
        return self.source_span(start, start + len(symbol))

    def refusal(self, message: str, span: tuple[int, int]) -> ExprError:
        return self.error(caret(f"{self.where}: {message}", self.text, span))

    def fail(self, message: str, span: tuple[int, int]):
        raise self.refusal(message, span)

    # ------------------------------------------------------------------ the walk

    def read(self, node: ast.AST) -> Node:
        visit = getattr(self, f"_{type(node).__name__}", None)
        if visit is None:
            self.fail(f"{_DESCRIBED.get(type(node), f'`{type(node).__name__}`')} is not part "
                      f"of {self.language}{self.summary}", self.span(node))
        return visit(node)

    def num(self, node: ast.AST, what: str) -> Node:
        """``node`` read, refused unless it is a number."""
        out = self.read(node)
        if out.type != "num":
            self.fail(f"{what} must be a number, not {_TYPES[out.type]}", out.span)
        return out

    def boolean(self, node: ast.AST, what: str) -> Node:
        """``node`` read, refused unless it is true or false."""
        out = self.read(node)
        if out.type != "bool":
            self.fail(f"{what} must be true or false (a comparison), not "
                      f"{_TYPES[out.type]}", out.span)
        return out

    def name(self, node: ast.Name) -> Node:
        """A bare name: a ``name`` node, whose values the evaluation is given."""
        return Node("name", node.id, span=self.span(node))

    def _Name(self, node: ast.Name) -> Node:
        return self.name(node)

    def _Constant(self, node: ast.Constant) -> Node:
        value, span = node.value, self.span(node)
        if isinstance(value, str | bytes):
            if self.strings and isinstance(value, str):
                return Node("str", value, type="str", span=span)
            self.fail(f"a string is not part of {self.language}{self.summary}", span)
        if isinstance(value, bool) and self.booleans:
            return Node("num", value, type="bool", span=span)
        literal = self.source[node.col_offset:node.end_col_offset]
        if isinstance(value, bool) or not isinstance(value, int | float | complex):
            self.fail(f"the constant {literal} is not part of {self.language}{self.summary}",
                      span)
        if not _NUMBER.fullmatch(literal):
            self.fail(f"{literal!r} is not a number of {self.language}: numbers are "
                      "written in decimal (16, 0.5, 1e-3)", span)
        if type(value) is int and value > _INT64_MAX:
            value = float(literal)
        if value in (float("inf"), float("-inf")):
            self.fail("a number beyond float64's range (about 1.8e308)", span)
        return Node("num", value, span=span)

    def _BinOp(self, node: ast.BinOp) -> Node:
        op = ARITHMETIC.get(type(node.op))
        if op is None:
            where = self.operator_span(node.left, node.right)
            logic = _LOGIC_OPERATORS.get(type(node.op))
            if logic is not None:
                self.fail(instead(logic, self.language), where)
            self.fail(f"the operator `{_OTHER_OPERATORS.get(type(node.op), '?')}` is not "
                      f"part of {self.language} (+ - * / only)", where)
        left = self.num(node.left, f"the left side of {op}")
        right = self.num(node.right, f"the right side of {op}")
        return combine("op", op, (left, right), "num", self.span(node))

    def _UnaryOp(self, node: ast.UnaryOp) -> Node:
        span = self.span(node)
        if isinstance(node.op, ast.Not):
            arg = self.boolean(node.operand, "what `not` negates")
            return combine("not", "not", (arg,), "bool", span)
        if isinstance(node.op, ast.USub | ast.UAdd):
            arg = self.num(node.operand, "a signed value")
            if isinstance(node.op, ast.UAdd):
                return arg
            if arg.kind == "num":
                return Node("num", -arg.value, span=span)
            return combine("neg", "-", (arg,), "num", span)
        self.fail(instead("~", self.language), (span[0], span[0] + 1))

    def _BoolOp(self, node: ast.BoolOp) -> Node:
        kind = "and" if isinstance(node.op, ast.And) else "or"
        args = tuple(self.boolean(v, f"each side of `{kind}`") for v in node.values)
        return combine(kind, kind, args, "bool", self.span(node))

    def _Compare(self, node: ast.Compare) -> Node:
        sides = [node.left, *node.comparators]
        for a, op, b in zip(sides, node.ops, sides[1:], strict=False):
            if type(op) not in COMPARISONS:
                self.fail(f"the operator `{_OTHER_OPERATORS.get(type(op), '?')}` is not "
                          f"part of {self.language} (< <= > >= == != only)",
                          self.operator_span(a, b))
        ops = [COMPARISONS[type(op)] for op in node.ops]
        if self.strings:
            self.check_strings(sides, ops)
        read = [self.read(s) if self.is_string(s) else
                self.num(s, "each side of a comparison") for s in sides]
        pairs = tuple(combine("cmp", op, (a, b), "bool", (a.span[0], b.span[1]))
                      for op, a, b in zip(ops, read, read[1:], strict=False))
        if len(pairs) == 1:
            return pairs[0]
        return combine("and", "and", pairs, "bool", self.span(node))

    def is_string(self, node: ast.AST) -> bool:
        """Whether ``node`` is a string literal this reader accepts."""
        return self.strings and isinstance(node, ast.Constant) and type(node.value) is str

    def check_strings(self, sides: list[ast.AST], ops: list[str]) -> None:
        """Refuse a string compared otherwise than with == or != to a name."""
        for a, op, b in zip(sides, ops, sides[1:], strict=False):
            for this, other in ((a, b), (b, a)):
                if not self.is_string(this):
                    continue
                if op not in ("==", "!="):
                    self.fail(f"a string compares with == or != only, not {op!r}",
                              self.span(this))
                if not isinstance(other, ast.Name):
                    self.fail("a string compares with a name, e.g. symbol == 'MSFT'",
                              self.span(this))
