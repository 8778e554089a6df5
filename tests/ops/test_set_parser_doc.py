"""ARCHITECTURE.md names the commands that share the one ``--set KEY=VALUE`` parser (issue 26: "README and --help
true"); that list must be exactly the commands that have a ``--set`` option (it once named ``factory run``, which
has none)."""

from __future__ import annotations

import re

from factory.cli import app
from tests.conftest import REPO_ROOT


def commands_with_set() -> set[str]:
    import typer.main

    root = typer.main.get_command(app)
    found = set()
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        if any("--set" in getattr(param, "opts", ()) for param in command.params):
            found.add(name)
    return found


def test_architecture_names_exactly_the_commands_that_take_set() -> None:
    text = " ".join((REPO_ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    said = re.search(r"the one `--set KEY=VALUE` parser of (`factory [a-z]+`(?:, `[a-z]+`)*(?:,? and `[a-z]+`)?)", text)
    assert said, "ARCHITECTURE.md no longer says which commands share the --set parser"
    named = set(re.findall(r"`(?:factory )?([a-z]+)`", said.group(1)))
    assert named == commands_with_set(), (named, commands_with_set())
