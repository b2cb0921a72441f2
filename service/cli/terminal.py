"""Text from the server or a submission, made safe to print on a terminal.

Student code controls much of what a report shows (exception messages, printed output, file
names): printed raw, an escape sequence could clear the screen, rewrite earlier lines, set the
window title or write the clipboard (OSC 52). Every escape sequence is removed and every other
control character but newline and tab (with the bidirectional overrides, which reorder what a
line seems to say, and lone surrogates, which no terminal can encode) is shown as a visible
``\\xNN``/``\\uNNNN`` escape.
"""

from __future__ import annotations

import re

from service.core.visible import INVISIBLE_CHARS, mark

# ESC-introduced sequences: CSI (ESC [ ... final), OSC / DCS / SOS / PM / APC strings (up to BEL
# or ST), and two-character escapes; and their 8-bit C1 forms (CSI U+009B, OSC U+009D, ...).
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x20-\x3f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?")
_CONTROL = re.compile(f"[\r{INVISIBLE_CHARS}\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """``text`` without escape sequences; other control characters made visible. A carriage
    return ends no line here (it would let a later text overwrite an earlier one)."""
    text = _SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _CONTROL.sub(mark, text)
