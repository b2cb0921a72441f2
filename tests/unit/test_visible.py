"""Invisible and reordering characters shown as marks, CSV cells that stay text, and the one
rule for stored file names."""

from __future__ import annotations

import io
import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from service.cli.terminal import terminal_safe
from service.core.visible import INVISIBLE_CHARS, CSVWriter, csv_cell, show_invisible
from service.submissions.uploads import name_problem

INVISIBLE = re.compile(f"[{INVISIBLE_CHARS}]")


@given(st.text(st.characters(blacklist_characters="\\")))
def test_nothing_invisible_is_left_and_the_marks_spell_what_was_there(text: str) -> None:
    shown = show_invisible(text)
    assert not INVISIBLE.search(shown)
    unmarked = re.sub(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4}))",
                      lambda m: chr(int(m.group(1) or m.group(2), 16)), shown)
    assert unmarked == text


def test_a_reordered_condition_reads_as_written() -> None:
    # U+202E (RIGHT-TO-LEFT OVERRIDE) and U+2066 (LEFT-TO-RIGHT ISOLATE) make a line of code
    # display in another order than Python reads it.
    code = 'if access_level != "user\u202e \u2066# Check if admin\u2069 \u2066":'
    assert show_invisible(code) == ('if access_level != "user\\u202e \\u2066# Check if admin'
                                    '\\u2069 \\u2066":')
    assert show_invisible(Markup("<b>\u200b</b>")) == Markup("<b>\\u200b</b>")
    assert isinstance(show_invisible(Markup("x\u200by")), Markup)


def test_pages_csv_and_terminal_mark_the_same_characters() -> None:
    for char in ("\u202e", "\u2066", "\u200b", "\u061c", "\ufeff", "\x07"):
        assert show_invisible(char) == terminal_safe(char) == csv_cell(char)


@pytest.mark.parametrize(("cell", "written"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-1.5", "-1.5"),
    ("+3 days", "+3 days"),
    ("alice", "alice"),
    (3, 3),
])
def test_csv_cells_never_start_a_formula(cell: object, written: object) -> None:
    assert csv_cell(cell) == written
    out = io.StringIO()
    CSVWriter(out).writerow([cell])
    assert out.getvalue().strip().strip('"').replace('""', '"') == str(written)


@pytest.mark.parametrize(("name", "says"), [
    ("atten\u202etion.py", "invisible"),
    ("a\u200bttention.py", "invisible"),
    ("x\x07.py", "control character"),
    ("CON.py", "device"),
    ("lpt1.py", "device"),
    ("aux .py", "device"),
    ("helper.py.", "dot or a space"),
    ("=1+1.py", "formula"),
    ("-rf.py", "option"),
    ("..\\..\\x.py", "plain file name"),
    ("a/b.py", "plain file name"),
    ("..", "plain file name"),
])
def test_names_that_could_mislead_or_escape_are_refused(name: str, says: str) -> None:
    problem = name_problem(name)
    assert problem is not None and says in problem


@given(st.text(min_size=1, max_size=40))
def test_a_name_the_rule_keeps_is_one_plain_visible_component(name: str) -> None:
    if name_problem(name) is None:
        assert "/" not in name and "\\" not in name and name not in (".", "..")
        assert show_invisible(name) == name
        assert not any(unicodedata.category(c).startswith("C") and c != "\u200d"
                       and unicodedata.category(c) != "Co" and unicodedata.category(c) != "Cn"
                       for c in name)
        assert name[0] not in "=+-@"


@pytest.mark.parametrize("name", ["attention.py", "helper_2.py", "Lab 1.ipynb", "émile.py",
                                  "console.py", "com10.py"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert name_problem(name) is None
