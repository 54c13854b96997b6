"""The command line's help: every command listed with a line, every option explained,
no reStructuredText markup (``x``, :func:`x`) shown to people."""

import argparse
import re
import subprocess
import sys

from barsweep.pipeline.cli import build_parser

#: reStructuredText that help text must not show: ``literal``, :role:`target`, .. directive
MARKUP = re.compile(r"``|:[a-z]+:`|^\s*\.\. \w", re.MULTILINE)
#: actions argparse makes itself, explained by argparse
OWN = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("barsweep",),
             text: str | None = None):
    """(command path, its parser, its one-line help) for the program and every command
    and sub-command below it."""
    yield path, parser, parser.description if text is None else text
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name), helps.get(name) or "")


def all_commands():
    return list(commands(build_parser()))


def test_every_command_has_a_help_line():
    found = all_commands()
    assert len(found) > 10  # the program, its commands, data's and plot's sub-commands
    missing = [" ".join(path) for path, _, text in found if not (text or "").strip()]
    assert not missing, f"commands without help: {missing}"


def test_every_option_and_argument_has_help():
    missing = []
    for path, parser, _ in all_commands():
        for action in parser._actions:
            if isinstance(action, OWN) or action.help == argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                missing.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"without help: {missing}"


def test_no_help_shows_rest_markup():
    shown = []
    for path, parser, text in all_commands():
        page = parser.format_help()  # also fails on a stray % in any help
        for where in (text or "", page):
            if MARKUP.search(where):
                shown.append(f"{' '.join(path)}: {MARKUP.search(where).group()!r}")
    assert not shown, shown


def test_top_level_help_lists_every_command_with_its_line():
    done = subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    listed = dict(re.findall(r"^    (\S+)\s+(\S.*)$", done.stdout, re.MULTILINE))
    top = [(path[1], text) for path, _, text in all_commands() if len(path) == 2]
    assert {name for name, _ in top} <= set(listed), done.stdout
    for name, text in top:  # each with its own line, its help's first words on it
        assert text.split()[0] == listed[name].split()[0], (name, listed[name])
    assert "``" not in done.stdout and "COMMAND --help" in done.stdout
