"""The one error type for problems a user can fix (bad input, a model that is not there).

The CLI prints it as a single line and the app shows it in the page; anything else is a bug
and keeps its traceback.
"""


class UserError(ValueError):
    pass
