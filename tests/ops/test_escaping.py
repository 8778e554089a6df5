"""Output escaping (issue 19 item 4): JSON and human output escape every control and bidi character, so text from
env code (C1 controls such as U+009B, bidi overrides such as U+202E) cannot act on a terminal; data survives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.cli.common import escape_controls, json_text
from tests.ops.conftest import run_factory

HOSTILE = "ok \x9b31m \u202eevil\u202c \u2066iso\u2069 \u200fmark \x1b]52;c;x\x07 \u2028line \U000e0041tag"
RAW = ["\x9b", "\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\x1b", "\x07", "\u2028", "\U000e0041"]


@pytest.mark.slow
def test_json_output_of_env_code_escapes_c1_and_bidi_characters_and_round_trips() -> None:
    """What env code prints, through `factory sandbox exec --json`: escaped on the wire, exact after json.loads."""
    code = f"import sys; sys.stdout.write({HOSTILE!r})"
    ran = run_factory("sandbox", "exec", "--sandbox", "bwrap", "--json", "--", "python3", "-c", code)
    assert ran.code == 0, ran.stderr
    for char in RAW:
        assert char not in ran.stdout, repr(char)
    for escaped in ("\\u009b", "\\u202e", "\\u202c", "\\u2066", "\\u200f", "\\u001b", "\\u2028", "\\udb40\\udc41"):
        assert escaped in ran.stdout, escaped
    assert json.loads(ran.stdout)["stdout"] == HOSTILE  # escaping changes the bytes, never the data

    human = run_factory("sandbox", "exec", "--sandbox", "bwrap", "--", "python3", "-c", code)
    assert human.code == 0
    for char in RAW:
        assert char not in human.stdout, repr(char)
    assert "\\x9b31m" in human.stdout and "\\u202eevil" in human.stdout  # shown, visibly, not acted on


def test_a_manifest_from_the_registry_is_escaped_in_json_and_tables(tmp_path: Path) -> None:
    from tests.reliability.conftest import put as put_described

    root = tmp_path / "registry"
    put_described(root, description=HOSTILE)
    for args in (["envs", "show", "tiny_cancel", "--json"], ["envs", "list", "--json"], ["envs", "show", "tiny_cancel"]):
        ran = run_factory(*args, TRACE_FACTORY_REGISTRY=str(root))
        assert ran.code == 0, ran.stderr
        for char in RAW:
            assert char not in ran.stdout, (args, repr(char))
    shown = json.loads(run_factory("envs", "show", "tiny_cancel", "--json", TRACE_FACTORY_REGISTRY=str(root)).stdout)
    assert shown["description"] == HOSTILE


def test_escape_functions_cover_every_control_and_bidi_character() -> None:
    import unicodedata

    controls = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\t\n"]
    bidi = [chr(c) for c in range(0x110000) if unicodedata.bidirectional(chr(c)) in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")]
    marks = ["\u200e", "\u200f", "\u061c"]
    for char in controls + bidi + marks:
        assert char not in escape_controls(f"a{char}b"), hex(ord(char))
        text = json_text(json.dumps({"k": f"a{char}b"}, ensure_ascii=False))
        assert char not in text and json.loads(text)["k"] == f"a{char}b", hex(ord(char))
    assert escape_controls("tab\tand\nnewline") == "tab\tand\nnewline"
    assert json_text(json.dumps({"k": "é 中 🙂"}, indent=2, ensure_ascii=False)) == json.dumps({"k": "é 中 🙂"}, indent=2, ensure_ascii=False)
