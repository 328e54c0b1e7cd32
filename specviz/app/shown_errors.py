"""Errors a user can fix become a message in the page; the app keeps serving.

A UserError's text is shown as it is (it says what is wrong and what is allowed). Anything
else is a bug: its traceback goes to the server log and the page gets one line, never the
trace. The page renders a message as (sanitised) HTML and messages quote user input, so
'&' and '<' are escaped: a pair named '<b>x</b>' shows as typed. An API client reads the
message as plain text, so the API's handler keeps it unescaped (`html=False`).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable

import gradio as gr

from specviz.app.server_details import DETAILS, hide_details, redact  # noqa: F401 (the page's names for them)
from specviz.app.zero_gpu import QuotaSpent
from specviz.errors import UserError

log = logging.getLogger("specviz.app")

# A public page (`PageConfig.public`, set by `hide_details`) shows no server details
# (`server_details`): an unexpected error's text is left out, and a path in a message is shown as <path>.


def _as_page_error(e: Exception, html: bool) -> gr.Error:
    if isinstance(e, gr.Error):
        return e
    text = _as_text if html else str
    if isinstance(e, UserError):
        return gr.Error(text(redact(str(e))), print_exception=False)
    log.exception("unexpected error in a page handler")
    what = f"{type(e).__name__}: {e}" if DETAILS["shown"] else type(e).__name__
    return gr.Error(text(f"Something went wrong ({what}). The details are in the server log."), print_exception=False)


def _as_text(message: str) -> str:
    """The message escaped for HTML text ('>' alone starts no tag, so 'DRAFT -> TARGET' stays readable)."""
    return message.replace("&", "&amp;").replace("<", "&lt;")


def verdict(check: Callable[[], object] | None = None) -> dict:
    """Gradio's answer on one input as its request asks to join the queue: refused with the
    UserError's line that `check()` raises, else (and with no check) accepted. A refusal comes
    at once, not after the requests ahead of it have run."""
    try:
        if check is not None:
            check()
    except UserError as e:
        return gr.validate(False, str(e))
    return gr.validate(True, "")


def shown_errors(fn: Callable, *, html: bool = True) -> Callable:
    """Wrap a handler (plain or generator) so every failure reaches the page as gr.Error."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except QuotaSpent as e:
                if not html:  # an API client learns that the run did not happen
                    raise gr.Error(str(e), title="ZeroGPU quota", print_exception=False) from None
                gr.Warning(_as_text(str(e)), title="ZeroGPU quota")  # a notice on the page; the run just ends
            except Exception as e:
                raise _as_page_error(e, html) from None

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise _as_page_error(e, html) from None

    return wrapper
