"""The words an environment variable may say yes or no with, read one way for every switch.

What an unset, empty or unknown value means is each switch's own: the page's launch settings
refuse it, the others fall back to their default.
"""

from __future__ import annotations

YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")


def yes_no(text: str | None) -> bool | None:
    """True for a yes, False for a no, None for anything else (unset, empty or unknown);
    case and surrounding spaces do not count."""
    word = (text or "").strip().lower()
    return True if word in YES else False if word in NO else None
