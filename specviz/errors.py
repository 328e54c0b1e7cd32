"""The one error type for problems a user can fix (bad input, a model that is not there), and
how such a message shows a value it refuses.

The CLI prints it as a single line and the app shows it in the page; anything else is a bug
and keeps its traceback.
"""

import reprlib


class UserError(ValueError):
    pass


_SHORT = reprlib.Repr()  # its limits set one by one: Python 3.11's Repr takes no arguments
_SHORT.maxstring = _SHORT.maxother = 40
_SHORT.maxlist = _SHORT.maxtuple = 6
_SHORT.maxdict, _SHORT.maxlevel = 4, 2


def shown(value: object) -> str:
    """A refused value as a message shows it: cut short, however long (`reprlib`), so a
    message never repeats more than a few dozen characters of what a visitor sent."""
    return _SHORT.repr(value)
