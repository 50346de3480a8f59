r"""Text shown on a terminal: a query, a literal of it or a message quoting either is shown with
each control character (an escape sequence would run) and each bidirectional control (it
reorders the text around it, so a query would be shown other than it runs) replaced.

>>> printable("SELECT '\x1b[2J' FROM t\n")
"SELECT '�[2J' FROM t\n"
"""

from __future__ import annotations

import re

__all__ = ["BIDI_CONTROLS", "printable"]

# The bidirectional controls (right-to-left overrides and isolates, marks), as a character class
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def printable(text: str) -> str:
    """``text`` with each control character but TAB and newline, and each bidirectional
    control, shown as U+FFFD: one character for one, so columns stay where they were."""
    return _UNPRINTABLE.sub("\ufffd", text)
