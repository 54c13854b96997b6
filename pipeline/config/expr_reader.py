"""Reading an expression's text into its tree, refusing what is outside the language
(:mod:`barsweep.pipeline.config.expr` describes the language).

The tree is made of tuples: ``("num", value)``, ``("str", text)``, ``("name", name)``,
``("neg", x)``, ``(op, a, b)`` for ``op`` one of ``+ - * /`` and the comparisons,
``("not", x)``, ``("and", *xs)`` and ``("or", *xs)``. A chain ``a < b <= c`` is read as
``("and", ("<", a, b), ("<=", b, c))``.
"""

from __future__ import annotations

import ast
import re
import warnings

from ...errors import SpecError

__all__ = ["Reader"]

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # how a number may be written
_WORDS = re.compile(rf"[A-Za-z_]\w*|{_NUMBER.pattern}")  # names and numbers
_OUTSIDE = re.compile(r"[^ -~]|[#\\]")  # characters never part of the language
_SPELLINGS = {"&": " and ", "|": " or "}
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")  # a string literal, read as it is
_INT64_MAX = 2**63 - 1
_ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                ast.NotEq: "!="}
_KINDS = {ast.Call: "function call", ast.Attribute: "attribute", ast.Subscript: "subscript",
          ast.Lambda: "lambda", ast.Constant: "constant", ast.JoinedStr: "string",
          ast.Tuple: "tuple", ast.IfExp: "conditional expression", ast.NamedExpr: "assignment",
          ast.BinOp: "operator", ast.UnaryOp: "operator", ast.Compare: "operator"}
_LANGUAGE = ("the language has decimal numbers, names, + - * /, comparisons, and/or/not "
             "and parentheses")
_HINTS = {
    "=": "; use '==' to compare",
    "!": "; use 'not' (or '!=' to compare)",
    **dict.fromkeys("'\".", "; strings, calls and attributes are not part of the language"),
}


def _error(text: str, pos: int, message: str, end: int | None = None) -> SpecError:
    """A SpecError showing `text` with carets under columns `pos` to `end` (0-based;
    one caret when `end` is None)."""
    shown = "".join(" " if c.isspace() else c for c in text)  # one line, columns kept
    return SpecError(
        f"cannot parse expression {text!r}: {message} (column {pos + 1})\n"
        f"    {shown}\n"
        f"    {' ' * pos}{'^' * max(1, (end or 0) - pos)}"
    )


def _unpadded(word: str) -> str:
    """``007`` as ``  7`` (columns kept): the language reads it as 7, Python refuses it."""
    digits = word.lstrip("0")
    return " " * (len(word) - len(digits)) + digits if word.isdigit() and digits else word


class Reader:
    """Parses `text` with :func:`ast.parse` and turns the tree into nodes (see the module
    docstring),
    refusing every node outside the language with a caret under it.

    :func:`ast.parse` reads `text` as one line: whitespace as spaces, ``&``/``|`` spelled
    ``and``/``or``, leading spaces and the leading zeros of numbers dropped (``007`` is 7).
    ``self.where[i]`` is the column in `text` of column ``i`` of that source.
    """

    def __init__(self, text: str, strings: bool = False) -> None:
        self.text = text
        self.strings = strings
        quoted = set()  # the columns inside string literals: read as they are
        for literal in _QUOTED.finditer(text):
            quoted.update(range(literal.start(), literal.end()))
        unpadded = _WORDS.sub(
            lambda word: word[0] if word.start() in quoted else _unpadded(word[0]), text)
        pieces, where = [], []
        for i, char in enumerate(unpadded):
            piece = char if i in quoted else _SPELLINGS.get(char, " " if char.isspace()
                                                            else char)
            pieces.append(piece)
            where.extend([i] * len(piece))
        self.source = "".join(pieces).lstrip(" ")
        self.where = where[len(where) - len(self.source):] + [len(text)]

    def fail(self, start: int, message: str) -> SpecError:
        """A SpecError with a caret under column `start` of the source."""
        return _error(self.text, self.where[min(start, len(self.source))], message)

    def read(self) -> tuple:
        outside = _OUTSIDE.search(self.source)
        if outside:
            char = self.text[self.where[outside.start()]]
            raise self.fail(outside.start(), f"unexpected character {char!r}{_HINTS.get(char, '')}")
        try:
            with warnings.catch_warnings():  # '1and' and the like: accepted, whatever -W says
                warnings.simplefilter("ignore")
                tree = ast.parse(self.source, mode="eval")
            node, kind = self.node(tree.body)
        except SyntaxError as error:
            raise self.syntax_error(error) from None
        except (RecursionError, MemoryError):  # MemoryError: the parser's stack overflowed
            raise self.fail(0, "the expression is nested too deeply") from None
        if kind != "a condition":
            raise self.fail(0, "the expression is a number, not a condition: compare it, "
                               "e.g. 'fast < slow'")
        return node

    def syntax_error(self, error: SyntaxError) -> SpecError:
        start = (error.offset or 0) - 1
        if not self.source:
            return self.fail(0, "the expression is empty")
        if "never closed" in error.msg:
            column = self.where[start] + 1
            return self.fail(len(self.source), f"the '(' at column {column} is never closed")
        if not 0 <= start < len(self.source):
            return self.fail(len(self.source), "unexpected end of the expression")
        what = self.source[start:max(start + 1, (error.end_offset or 0) - 1)].strip()
        what = what or self.source[start]
        message = f"unexpected {what!r}" if error.msg.startswith("invalid syntax") else (
            error.msg.split(" (detected")[0].split(";")[0])  # Python's hints do not apply
        return self.fail(start, message + _HINTS.get(what[0], ""))

    def node(self, node: ast.AST) -> tuple[tuple, str]:
        """`node` as a tree of tuples, and its kind: "a number" or "a condition"."""
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return (op, *(self.operand(v, "a condition", f"'{op}'") for v in node.values)), (
                "a condition")
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for a, op, b in zip(operands, node.ops, operands[1:], strict=False):
                if type(op) not in _COMPARISONS:
                    raise self.refuse(node, self.operator(a, b))
            ops = [_COMPARISONS[type(op)] for op in node.ops]
            if self.strings:
                self.check_strings(operands, ops)
            trees = [self.operand(v, "a string" if self.is_string(v) else "a number",
                                  f"'{op}'")
                     for v, op in zip(operands, [ops[0], *ops], strict=True)]
            links = list(zip(ops, trees, trees[1:], strict=False))
            return (links[0] if len(links) == 1 else ("and", *links)), "a condition"
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            op = _ARITHMETIC[type(node.op)]
            return (op, self.operand(node.left, "a number", f"'{op}'"),
                    self.operand(node.right, "a number", f"'{op}'")), "a number"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", self.operand(node.operand, "a condition", "'not'")), "a condition"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            sign = "-" if isinstance(node.op, ast.USub) else "+"
            operand = self.operand(node.operand, "a number", f"unary '{sign}'")
            return (("neg", operand) if sign == "-" else operand), "a number"
        if isinstance(node, ast.Name):
            return ("name", node.id), "a number"
        if self.is_string(node):
            return ("str", node.value), "a string"
        literal = self.source[node.col_offset:node.end_col_offset]
        if (isinstance(node, ast.Constant) and type(node.value) in (int, float)
                and _NUMBER.fullmatch(literal)):
            too_big = type(node.value) is int and node.value > _INT64_MAX
            return ("num", float(literal) if too_big else node.value), "a number"
        if isinstance(node, ast.BinOp):
            raise self.refuse(node, self.operator(node.left, node.right))
        if isinstance(node, ast.UnaryOp):  # "~"
            raise self.refuse(node, (node.col_offset, node.col_offset + 1))
        raise self.refuse(node, (node.col_offset, node.end_col_offset))

    def is_string(self, node: ast.AST) -> bool:
        """Whether `node` is a string literal this reader accepts."""
        return self.strings and isinstance(node, ast.Constant) and type(node.value) is str

    def check_strings(self, operands: list[ast.AST], ops: list[str]) -> None:
        """Refuse a string compared otherwise than with == or != to a name."""
        for a, op, b in zip(operands, ops, operands[1:], strict=False):
            for this, other in ((a, b), (b, a)):
                if not self.is_string(this):
                    continue
                if op not in ("==", "!="):
                    raise self.fail(this.col_offset, f"a string compares with == or != "
                                                     f"only, not {op!r}")
                if not isinstance(other, ast.Name):
                    raise self.fail(this.col_offset, "a string compares with a name, e.g. "
                                                     "symbol == 'MSFT'")

    def operand(self, node: ast.AST, kind: str, role: str) -> tuple:
        """`node` as a tree, refused unless it is of `kind`."""
        tree, got = self.node(node)
        if got != kind:
            raise self.fail(node.col_offset, f"{role} needs {kind}, got {got}")
        return tree

    def operator(self, left: ast.AST, right: ast.AST) -> tuple[int, int]:
        """Where the operator between `left` and `right` stands (parentheses aside)."""
        gap = self.source[left.end_col_offset:right.col_offset]
        start = left.end_col_offset + gap.index(gap.strip(" ()"))
        return start, start + len(gap.strip(" ()"))

    def refuse(self, node: ast.AST, span: tuple[int, int]) -> SpecError:
        """A SpecError with carets under `span` of the source, what `node` is in it."""
        kind = _KINDS.get(type(node), "expression")
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            kind = "string"
        pos, end = self.where[span[0]], self.where[span[1] - 1] + 1
        return _error(self.text, pos, f"unexpected {kind} {self.text[pos:end]!r}: {_LANGUAGE}",
                      end)
