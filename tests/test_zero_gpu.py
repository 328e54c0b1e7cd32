"""ZeroGPU: what a run asks for, and what a visitor whose quota is spent is told.

The errors here are made by the installed `spaces` package's own factory, with the wording its
client writes (checked against the client's source, so a `spaces` release that words them
otherwise fails here instead of on a Space)."""

from __future__ import annotations

import inspect

import pytest

from specviz.app import zero_gpu
from specviz.app.zero_gpu import GRANT_MARGIN_S, MAX_GRANT_S, MIN_GRANT_S, Rates, grant_s, quota_message, run_limit_s


def test_a_short_run_asks_for_seconds_and_a_long_one_for_more_up_to_the_cap():
    short = grant_s(16, 0.03)
    longer = grant_s(256, 0.03)
    assert MIN_GRANT_S <= short < longer <= MAX_GRANT_S
    assert short < 20  # 16 tokens at 30 ms: setup and half a second, not 120 s
    assert grant_s(100_000, 0.03) == MAX_GRANT_S
    assert grant_s(0, 0.03) == MIN_GRANT_S
    assert grant_s(1024, 0.03, cap_s=30) == 30  # the operator's limit on a run stands
    # The grant covers setup plus the tokens at the slower-than-plain margin.
    assert longer >= zero_gpu.SETUP_S + zero_gpu.SLOWER * 256 * 0.03


def test_a_run_stops_itself_before_its_grant_ends():
    for grant in (MIN_GRANT_S, 37, MAX_GRANT_S):
        assert run_limit_s(grant) == grant - GRANT_MARGIN_S


def test_rates_come_from_finished_runs_of_the_same_pair():
    rates = Rates()
    assert rates.s_per_token("a") == zero_gpu.PRIOR_S_PER_TOKEN
    rates.observe("a", wall_s=2.0, tokens=100)
    assert rates.s_per_token("a") == pytest.approx(0.02)
    assert rates.s_per_token("b") == zero_gpu.PRIOR_S_PER_TOKEN
    rates.observe("a", wall_s=float("nan"), tokens=10)  # a run that measured nothing changes nothing
    rates.observe("a", wall_s=1.0, tokens=0)
    assert rates.s_per_token("a") == pytest.approx(0.02)


def _spaces_error(title: str, message: str):
    from spaces.zero.gradio import error

    return error(title, message)


def test_the_quota_wording_parsed_is_what_the_spaces_client_writes():
    from spaces.zero import client

    source = inspect.getsource(client.schedule)
    assert "s requested vs. {res.left}s left). " in source and "Try again in {res.wait}" in source
    assert '"ZeroGPU quota exceeded"' in source


def test_a_logged_in_visitor_over_quota_is_told_what_was_asked_what_is_left_and_when():
    e = _spaces_error(
        "ZeroGPU quota exceeded",
        "You have exceeded your free ZeroGPU quota (60s requested vs. 31s left). Try again in 0:12:34. ",
    )
    words = quota_message(e)
    assert "60 s" in words and "31 s left" in words and "try again in 0:12:34" in words
    assert "fewer new tokens" in words


def test_a_visitor_not_logged_in_is_told_the_quota_is_spent_and_refills():
    e = _spaces_error(
        "ZeroGPU quota exceeded", "Space app has reached its GPU limit. Try re-running outside of examples"
    )
    words = quota_message(e)
    assert "not logged in" in words and "refills" in words


def test_other_errors_are_not_quota():
    assert quota_message(_spaces_error("ZeroGPU client error", "No GPU was available")) is None
    assert quota_message(ValueError("quota")) is None
