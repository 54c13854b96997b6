"""The README and the pages of docs/: short, linked, and held to the code they describe.

The README stays a newcomer's page of at most 250 lines whose test command is the one
``.ci/run`` runs. In README.md and docs/*.md every relative link reaches a file (and a
heading, for a ``#anchor``); every ``barsweep`` command, in a bash block or in inline code,
parses with the real command-line parser; every YAML block validates with the real spec
loader, as a whole spec or as a part of one; every Python block compiles and its imports
run; every dotted name of the package in code (``barsweep.engine.backtest.single``) exists.
docs/CLI.md names every command and every option the parser has. (docs/deploy.md's ``dask`` and
``kubectl`` commands and job scripts are held to the code by
``tests/pipeline/test_deploy.py``.)
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import shlex
from pathlib import Path

import pytest
import yaml

from barsweep.pipeline.cli import build_parser
from barsweep.pipeline.config.model import Spec, load_spec
from barsweep.pipeline.run.cluster import check_address

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
CLI_PAGE = ROOT / "docs" / "CLI.md"
README_MAX_LINES = 250

#: what a YAML block that is only part of a spec is completed with
BASE = {
    "data": {"store": "bars/", "symbols": ["BTCUSDT"], "timeframe": "1h"},
    "strategy": "ema_cross",
    "grid": {"fast": [5, 10], "slow": [20, 40]},
    "constraints": ["fast < slow"],
}
#: tokens that end one simple shell command
SHELL_OPERATORS = {"&&", "||", "|", ";"}
#: a redirection token alone (its target follows) or with its target
REDIRECT = re.compile(r"\d*[<>]>?(&\d)?")
REDIRECT_WITH_TARGET = re.compile(r"\d*[<>]>?\S+")


# --------------------------------------------------------------------------- markdown


def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def name_of(page: Path) -> str:
    return str(page.relative_to(ROOT))


def fenced(text: str, lang: str) -> list[str]:
    """The bodies of the ```lang fenced blocks of markdown ``text``."""
    return [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)
            if m.group(1) == lang]


def prose(text: str) -> str:
    """``text`` without its fenced blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def inline_code(text: str) -> list[str]:
    """The inline code spans of ``text``'s prose, whitespace collapsed."""
    return [" ".join(m.group(1).split()) for m in re.finditer(r"`([^`]+)`", prose(text))]


def links(text: str) -> list[str]:
    """The targets of the links and images of ``text``'s prose (not of its code)."""
    plain = re.sub(r"`[^`]*`", "", prose(text))
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", plain)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives ``text``'s headings: lower case, punctuation but ``-``
    and ``_`` dropped, spaces made ``-``, a repeated one suffixed ``-1``, ``-2``..."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        unique, n = slug, 0
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


# --------------------------------------------------------------------------- commands


def shell_commands(source: str):
    """Each simple command of shell ``source`` as tokens: continuations joined, quotes
    spanning lines kept whole, comments, leading ``VAR=value`` assignments and
    redirections dropped, and ``&&``, ``||``, ``|``, ``;`` (unquoted) ending a command."""
    pending = ""
    for line in source.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        lexer = shlex.shlex(pending, posix=False)  # quotes kept: `';'` is no operator
        lexer.whitespace_split = True
        try:
            quoted = list(lexer)
        except ValueError:  # a quote open across lines
            continue
        pending = ""
        yield from simple_commands(quoted)
    assert not pending, f"unbalanced quotes in {source!r}"


def simple_commands(quoted: list[str]):
    """The commands of one line's tokens, quotes still on them (taken off here)."""
    command: list[str] = []
    skip_target = False
    for token in [*quoted, ";"]:
        if skip_target:
            skip_target = False
        elif token in SHELL_OPERATORS:
            while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", command[0]):
                command.pop(0)
            if command:
                yield command
            command = []
        elif REDIRECT.fullmatch(token):
            skip_target = not token.endswith(("&1", "&2"))
        elif not REDIRECT_WITH_TARGET.fullmatch(token):
            command.append("".join(shlex.split(token)))


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(the words after ``barsweep``, the parser) of the program and every command and
    sub-command below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from command_paths(sub, (*path, name))


def barsweep_commands(page: Path) -> list[list[str]]:
    """The ``barsweep`` commands of ``page``'s bash blocks and of its inline code of more
    than two words, as tokens; inline code naming a command (``barsweep plot best``) is
    a name, not a command."""
    text = text_of(page)
    names = {path for path, _ in command_paths(build_parser())}
    inline = [code for code in inline_code(text) if len(code.split()) > 2]
    found = []
    for source in fenced(text, "bash") + inline:
        for tokens in shell_commands(source):
            if Path(tokens[0]).name == "barsweep" and tuple(tokens[1:]) not in names:
                found.append(tokens)
    return found


# --------------------------------------------------------------------------- specs


def alternatives(block: str) -> list[str]:
    """``block`` cut where a top-level key comes again: a block listing the values one
    key may take (``cluster: local``, ``cluster: cuda``...) is one spec part each."""
    parts: list[list[str]] = [[]]
    keys: set[str] = set()
    for line in block.splitlines():
        key = re.match(r"([A-Za-z_]\w*):", line)
        if key and key.group(1) in keys:
            parts.append([])
            keys = set()
        if key:
            keys.add(key.group(1))
        parts[-1].append(line)
    return ["\n".join(part) + "\n" for part in parts if any(s.strip() for s in part)]


def write_spec(directory: Path, data: dict) -> Path:
    """``data`` as spec.yaml in ``directory``, with the TLS files it names made there."""
    cluster = data.get("cluster")
    security = cluster.get("security") if isinstance(cluster, dict) else None
    for name in (security.values() if isinstance(security, dict) else ()):
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text("PEM\n")
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the tests


def test_readme_is_a_newcomers_page():
    lines = text_of(README).splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; at most {README_MAX_LINES}: move detail to docs/")


def test_readme_test_command_is_the_one_ci_runs():
    """``.ci/run`` runs the README's test command (pip quiet there)."""
    [ci] = [line for line in text_of(ROOT / ".ci" / "run").splitlines()
            if line.startswith("python3.11 -m venv") and "pytest" in line]
    [shown] = [block for block in fenced(text_of(README), "bash") if "pytest" in block]
    assert shlex.split(shown) == shlex.split(ci.replace("pip install -q ", "pip install "))


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(text_of(page)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(text_of(linked))):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, f"{name_of(page)}: {broken}"


def test_links_are_found():
    """The link reader sees links (and the README's pictures), not code."""
    text = "[a](x.md#b) ![p](img/p.png) `[c](y.md)`\n```bash\n[d](z.md)\n```\n## B `c`\n"
    assert links(text) == ["x.md#b", "img/p.png"]
    assert anchors(text + "## B c\n## Probability (`--pbo`)\n") == {"b-c", "b-c-1",
                                                                     "probability---pbo"}
    assert sum(target.startswith("docs/img/") for target in links(text_of(README))) == 3


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_barsweep_command_parses(page):
    parser = build_parser()
    refused = []
    for tokens in barsweep_commands(page):
        try:
            args = parser.parse_args(tokens[1:])
        except SystemExit:
            refused.append(shlex.join(tokens))
            continue
        if args.command == "run" and args.scheduler is not None:
            check_address(args.scheduler, "--scheduler")
    assert not refused, f"{name_of(page)}: these do not parse: {refused}"


def test_the_pages_show_commands():
    """The command reader finds the pages' commands (names and pipes aside)."""
    line = "A=1 barsweep rank r.zarr --where \"a == 'b'\" | head > top.txt # c"
    assert list(shell_commands(line)) == [
        ["barsweep", "rank", "r.zarr", "--where", "a == 'b'"], ["head"]]
    assert list(shell_commands("x --delimiter ';' && y 2>/dev/null")) == [
        ["x", "--delimiter", ";"], ["y"]]
    counts = {page.name: len(barsweep_commands(page)) for page in PAGES}
    assert counts["README.md"] >= 9 and counts["CLI.md"] >= 35, counts


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_spec_validates(page, tmp_path):
    """Each YAML block is a whole spec, or a part of one completed by ``BASE`` (without
    its grid and constraints when the block names its strategy); a block listing one
    key's values validates each value."""
    for i, block in enumerate(fenced(text_of(page), "yaml")):
        for j, part in enumerate(alternatives(block)):
            data = yaml.safe_load(part)
            assert isinstance(data, dict) and set(data) <= set(Spec.model_fields), part
            base = BASE if "strategy" not in data else {  # its own strategy: its own grid
                k: v for k, v in BASE.items() if k not in ("grid", "constraints")}
            whole = data if {"data", "strategy"} <= set(data) else {**base, **data}
            directory = tmp_path / f"spec{i}-{j}"
            directory.mkdir()
            load_spec(write_spec(directory, whole))


def test_a_block_of_values_is_one_spec_part_each():
    block = "cluster: auto\ncluster: {kind: scheduler, address: tls://s:8786,\n  x: 1}\n"
    assert alternatives(block) == [
        "cluster: auto\n", "cluster: {kind: scheduler, address: tls://s:8786,\n  x: 1}\n"]
    specs = sum(len(alternatives(b)) for page in PAGES for b in fenced(text_of(page), "yaml"))
    assert specs >= 12


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_python_block_compiles(page):
    for block in fenced(text_of(page), "python"):
        compile(block, f"{name_of(page)}, a python block", "exec")


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_import_of_a_python_block_runs(page):
    for block in fenced(text_of(page), "python"):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                statement = ast.unparse(node)
                try:
                    exec(compile(ast.Module([node], []), name_of(page), "exec"), {})
                except ImportError as err:
                    pytest.fail(f"{name_of(page)}: `{statement}` fails: {err}")


#: a dotted name of the package in the docs' code: ``barsweep.engine.backtest.single``, or one
#: relative to it (``engine.portfolio_periods.rebalance_table``); a file name
#: (``engine.py``) is not one
DOTTED = re.compile(r"(?<![\w./-])(?:barsweep|engine|pipeline|datasets)(?:\.[A-Za-z_]\w*)+")


def resolve(dotted: str):
    """The object ``dotted`` names: its longest importable module, then attributes."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            found = getattr(found, attr)
        return found
    raise ImportError(dotted)


@pytest.mark.parametrize("page", PAGES, ids=name_of)
def test_every_dotted_name_in_the_code_resolves(page):
    """Inline code and Python blocks that name the package's modules and functions
    (``barsweep.pipeline.analysis.walkforward.walkforward(path, ...)``) name real ones."""
    text = text_of(page)
    for code in inline_code(text) + fenced(text, "python"):
        for match in DOTTED.finditer(code):
            name = match.group(0)
            if name.endswith(".py"):
                continue
            full = name if name.startswith("barsweep.") else f"barsweep.{name}"
            try:
                resolve(full)
            except (ImportError, AttributeError) as err:
                pytest.fail(f"{name_of(page)} names `{name}`, which does not exist: {err}")


def cli_section(text: str, words: tuple[str, ...]) -> str:
    """The section of docs/CLI.md headed `` `barsweep WORDS` ``, to the next heading."""
    heading = re.search(rf"^#+ `barsweep {' '.join(words)}`\n", text, re.M)
    assert heading, f"docs/CLI.md has no heading `barsweep {' '.join(words)}`"
    lines, in_block = [], False
    for line in text[heading.end():].splitlines():
        in_block ^= line.startswith("```")
        if line.startswith("#") and not in_block:
            break
        lines.append(line)
    return "\n".join(lines)


def test_cli_page_names_every_command_and_option():
    text = text_of(CLI_PAGE)
    missing = []
    for words, parser in command_paths(build_parser()):
        subcommands = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        if not words or subcommands:  # the program's options: anywhere on the page
            section = text
        else:
            section = cli_section(text, words)
        for action in parser._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", section):
                    missing.append(f"barsweep {' '.join(words)} {option}".replace("  ", " "))
    assert not missing, f"docs/CLI.md lacks {missing}"


def test_the_rules_page_writes_each_builtin_as_its_rule():
    """docs/RULES.md's table of the builtins as rules: a row per builtin, its entry and
    exit those the compiler is held to (``cross_below(...)``: the entry's cross mirrored)."""
    from barsweep.engine.rules.builtins import BUILTIN_RULES

    table = text_of(ROOT / "docs" / "RULES.md").split("| builtin | entry | exit |\n", 1)[1]
    rows = {}
    for line in table.split("\n\n", 1)[0].splitlines()[1:]:
        name, entry, exit_ = (cell.strip().strip("`") for cell in line.strip("|").split("|"))
        rows[name] = entry, exit_
    assert sorted(rows) == sorted(BUILTIN_RULES)
    for name, (entry, exit_) in rows.items():
        rule = BUILTIN_RULES[name]
        mirrored = rule.entry.replace("cross_above(", "cross_below(", 1)
        assert entry == rule.entry, name
        assert exit_ == rule.exit or (exit_ == "cross_below(...)" and rule.exit == mirrored), name


def _package_modules() -> list[Path]:
    """Every module of the package (the repository's source, not its tests, benchmarks
    or docs), ``__init__.py`` files left out."""
    return [p for p in sorted(ROOT.rglob("*.py"))
            if p.relative_to(ROOT).parts[0] not in ("tests", "benchmarks", "docs", ".venv",
                                                    "build")
            and p.name != "__init__.py" and not p.relative_to(ROOT).parts[0].startswith(".")]


def test_the_layout_names_every_module():
    """docs/LAYOUT.md is the map: each module of the package is named there."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", (ROOT / "docs" / "LAYOUT.md").read_text()))
    unnamed = [p.relative_to(ROOT).as_posix() for p in _package_modules() if p.stem not in words]
    assert not unnamed, f"modules docs/LAYOUT.md does not name: {unnamed}"


#: A page a docstring or comment cites: a page of docs/ or benchmarks/ named with its
#: folder or bare (upper-case, ``.md``), or the README; a name in quotes or backticks is
#: a file the code writes, not a citation.
CITED = re.compile(r"(?<![`\"'/\w])((?:docs/|benchmarks/)?[A-Z][A-Z_]*\.md)\b")


def test_every_page_the_code_cites_exists():
    missing = []
    for path in _package_modules() + sorted((ROOT / "tests").rglob("*.py")):
        for match in CITED.finditer(path.read_text(encoding="utf-8")):
            page = match.group(1)
            where = [ROOT / page] if "/" in page else [ROOT / page, ROOT / "docs" / page,
                                                       ROOT / "benchmarks" / page]
            if not any(w.is_file() for w in where):
                missing.append(f"{path.relative_to(ROOT)}: {page}")
    assert not missing, missing
