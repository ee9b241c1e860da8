"""``xce`` itself: ``xce --help`` lists the commands as click would, without
importing them."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from xce_core.cli._main import _COMMANDS, main


@pytest.mark.parametrize("width", [30, 50, 80, 200])
def test_help_lists_the_commands_as_click_would(width: int) -> None:
    ours = CliRunner().invoke(main, ["--help"], terminal_width=width)
    assert ours.exit_code == 0
    # click's own listing asks each (imported) command for its short help.
    with click.Context(main, info_name="xce", terminal_width=width) as ctx:
        formatter = ctx.make_formatter()
        click.Group.format_commands(main, ctx, formatter)
    listing = formatter.getvalue()
    assert "Commands:" in listing
    assert ours.output.endswith(listing)


def test_each_summary_is_its_commands_first_paragraph() -> None:
    for name, (_, _, summary) in _COMMANDS.items():
        command = main.get_command(click.Context(main), name)
        assert command is not None
        assert command.help is not None
        assert command.help.partition("\n\n")[0] == summary, name


def test_help_imports_no_command() -> None:
    code = (
        "import sys\n"
        "from xce_core.cli._main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(set(sys.modules) & {m for m, _, _ in COMMANDS}))\n"
    ).replace("COMMANDS", repr(list(_COMMANDS.values())))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in out.stdout
    assert out.stdout.rstrip().endswith("[]")
