"""The error hierarchy raised at barsweep's boundaries.

Kernels never raise; functions that take user input validate it and raise one of
these with a message naming the file, key or row that was wrong.
"""


class BarsweepError(Exception):
    """Base class of every error barsweep raises on purpose.

    ``exit_code`` is the command line's exit status for it (2: refused input).
    """

    exit_code = 2


class DataError(BarsweepError, ValueError):
    """Bars that cannot be imported or opened (file, row and rule in the message)."""


class DataWarning(UserWarning):
    """Bars imported as asked that are likely not what the user meant (an adjusted close
    left unused, a move that looks like an unadjusted split), or a note on what was stored,
    as ``barsweep.sweep()`` reports it for bars in memory (the CLI prints the same line)."""


class SpecError(BarsweepError, ValueError):
    """A sweep spec, grid or parameter that is refused (the key in the message)."""


class BackendError(BarsweepError, RuntimeError):
    """A compute backend or cluster that cannot be used here."""


class OutputError(BarsweepError):
    """A report, picture or CSV that may not or cannot be written where asked (the path
    in the message)."""


class ResultsError(BarsweepError):
    """A results store that cannot be written, replaced, resumed or read as asked."""


class MismatchError(ResultsError):
    """A combo rebuilt from a results store whose metrics differ from the stored ones
    (the bars or barsweep changed since the run): a failed check, exit status 1."""

    exit_code = 1


class RunError(BarsweepError, RuntimeError):
    """A run that could not finish: a block failed, or no worker was there to run it.

    The store is left incomplete (its ``complete`` attribute false) and can be resumed.
    """

    exit_code = 1


class Interrupted(BarsweepError):
    """The user stopped the run (Ctrl-C, or SIGTERM as ``timeout``, systemd, SLURM and
    Kubernetes send it); the message says what is done and how to resume.

    ``exit_code`` is 128 + the signal's number, as a shell reports a process the
    signal ended: 130 for SIGINT, 143 for SIGTERM.
    """

    exit_code = 130

    def __init__(self, message: str = "", terminated: bool = False) -> None:
        super().__init__(message)
        self.terminated = terminated
        self.exit_code = 143 if terminated else 130


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the command line's SIGTERM handler, so that every
    path that stops cleanly on Ctrl-C (cancel the blocks, release the lock, say what is
    done) stops the same way on SIGTERM."""


class Problems(ValueError):
    """Several refused keys at once, each ``(dotted key, message)``: raised inside a
    pydantic validator, reported by :func:`refusals` as one line per key."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("\n".join(f"{key}: {message}" for key, message in problems))
        self.problems = problems


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, white space folded (a refusal is one line);
    its type's name when it has no message.

    >>> one_line(OSError("no\\n  such   file")), one_line(KeyError())
    ('no such file', 'KeyError')
    """
    return " ".join(str(exc).split()) or type(exc).__name__


#: Messages of a value refused by every member of a union, by the members' error types.
_UNION_MESSAGES = {frozenset({"int_type", "float_type"}): "Input should be a number"}


def refusals(err, root=None, prefix: str = "", skip: frozenset = frozenset()) -> list[str]:
    """One ``key: message`` line per refused key of a pydantic ``ValidationError``.

    ``root`` is the model validated (for the valid keys of a mapping that has unknown
    ones), ``prefix`` the dotted key it sits under (``execution``), ``skip`` the tags of
    union members to drop from keys. A value that every member of a union refused gives
    one line: the last member's message (the general one, e.g. "a valid integer" after
    "'auto'"), or one of :data:`_UNION_MESSAGES`.
    """
    lines: list[str] = []
    for error, types in _collapsed(err.errors()):
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, Problems):
            lines.extend(f"{_join(prefix, key)}: {message}" for key, message in cause.problems)
            continue
        message = str(cause) if error["type"] == "value_error" and cause else error["msg"]
        message = _UNION_MESSAGES.get(types, message) + _hint(error, root, skip)
        key = _join(prefix, _dotted(error["loc"], skip))
        lines.append(f"{key}: {message}" if key else message)
    return lines


def _collapsed(errors: list[dict]) -> list[tuple[dict, frozenset]]:
    """``errors`` with each union's member refusals (same key, then a member tag such as
    ``int`` or ``literal['auto']``) folded into the last, keyed without the tag; each with
    the error types folded into it."""
    out: list[tuple[dict, frozenset]] = []
    for error in errors:
        loc = error["loc"]
        if loc and _is_member_tag(loc[-1]):
            error = {**error, "loc": loc[:-1]}
            if out and out[-1][0]["loc"] == error["loc"] and out[-1][1]:
                error, types = error, out.pop()[1] | {error["type"]}
                out.append((error, types))
                continue
            out.append((error, frozenset({error["type"]})))
            continue
        out.append((error, frozenset()))
    return out


def _is_member_tag(part) -> bool:
    """Whether a key part names a union member (pydantic's ``int``, ``constrained-int``,
    ``literal['auto']``...) rather than a field."""
    return isinstance(part, str) and (part in ("int", "float", "str", "bool")
                                      or any(c in part for c in "[-'"))


def _join(prefix: str, key: str) -> str:
    if prefix and key:
        return f"{prefix}{'' if key.startswith('[') else '.'}{key}"
    return prefix or key


def _dotted(loc: tuple, skip: frozenset) -> str:
    """``("grid", "fast", "range", "step")`` -> ``"grid.fast.step"``; indices in brackets."""
    text = ""
    for part in loc:
        if part in skip:
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _hint(error: dict, root, skip: frozenset) -> str:
    """What to do, or what was received, to follow pydantic's message."""
    if error["type"] == "extra_forbidden":
        fields = _fields_at(root, [p for p in error["loc"][:-1] if p not in skip])
        return f"; valid keys: {', '.join(fields)}" if fields else ""
    if error["type"] in ("missing", "value_error"):
        return ""
    received = error.get("input")
    if isinstance(received, str | int | float | bool) or received is None:
        return f" (got {received!r})"
    return f" (got {type(received).__name__})"


def _fields_at(model, loc: tuple):
    """The fields of the model validating the mapping at ``loc`` under ``root``."""
    for part in loc:
        field = model.model_fields.get(part) if model and isinstance(part, str) else None
        model = field.annotation if field else None
        if not (isinstance(model, type) and hasattr(model, "model_fields")):
            return None
    return model.model_fields if model else None
