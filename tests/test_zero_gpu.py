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
    # 0.1 s to the first token, then 99 tokens in 1.98 s
    rates.observe("a", wall_s=2.08, new_tokens=100, prefill_s=0.1, prompt_tokens=50)
    assert rates.s_per_token("a") == pytest.approx(0.02)
    assert rates.s_per_prompt_token("a") == pytest.approx(0.002)
    assert rates.s_per_token("b") == zero_gpu.PRIOR_S_PER_TOKEN
    # runs that measured nothing change nothing
    rates.observe("a", wall_s=float("nan"), new_tokens=10, prefill_s=0.1, prompt_tokens=50, caller="x")
    rates.observe("a", wall_s=1.0, new_tokens=0, prefill_s=0.0, prompt_tokens=0, caller="y")
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


def _run(rates: Rates, caller: str, *, prompt_tokens: int, prefill_s: float, new_tokens: int, decode_s: float):
    rates.observe(
        "p",
        wall_s=prefill_s + decode_s,
        new_tokens=new_tokens,
        prefill_s=prefill_s,
        prompt_tokens=prompt_tokens,
        caller=caller,
    )


def test_a_long_prompt_with_one_new_token_does_not_raise_the_price_of_later_runs():
    rates = Rates()
    for i in range(5):  # honest runs: 20 ms a token, a 100-token prompt read in 50 ms
        _run(rates, f"v{i}", prompt_tokens=100, prefill_s=0.05, new_tokens=129, decode_s=128 * 0.02)
    before = grant_s(256, rates.s_per_token("p"), s_per_prompt_token=rates.s_per_prompt_token("p"))
    # 99,000 characters, about 25,000 tokens, read in 12 s; one new token
    _run(rates, "hostile", prompt_tokens=25_000, prefill_s=12.0, new_tokens=1, decode_s=0.0)
    assert rates.s_per_token("p") == pytest.approx(0.02)  # decoding priced by decoding alone
    after = grant_s(256, rates.s_per_token("p"), s_per_prompt_token=rates.s_per_prompt_token("p"))
    assert after == before < MAX_GRANT_S
    # 8 + 256 tokens at 1.5 x 20 ms (no prompt) = 15.68 s
    assert after == 16


def test_one_caller_counts_once_and_the_median_holds_against_a_minority():
    rates = Rates()
    for i in range(7):
        _run(rates, f"v{i}", prompt_tokens=100, prefill_s=0.05, new_tokens=65, decode_s=64 * 0.03)
    for _ in range(50):  # one caller's slow runs: only its newest counts
        _run(rates, "slow", prompt_tokens=100, prefill_s=0.05, new_tokens=65, decode_s=64 * 0.4)
    assert rates.s_per_token("p") == pytest.approx(0.03)
    for i in range(3):  # three more slow callers: 4 of 11, still a minority
        _run(rates, f"slow{i}", prompt_tokens=100, prefill_s=0.05, new_tokens=65, decode_s=64 * 0.4)
    assert rates.s_per_token("p") == pytest.approx(0.03)


def test_rates_are_clamped_and_old_callers_drop_out():
    rates = Rates(kept=3)
    _run(rates, "a", prompt_tokens=10, prefill_s=1e-9, new_tokens=3, decode_s=1e-9)  # measured nothing
    assert rates.s_per_token("p") == zero_gpu.S_PER_TOKEN_RANGE[0]
    assert rates.s_per_prompt_token("p") == zero_gpu.S_PER_PROMPT_TOKEN_RANGE[0]
    for c in "bcd":
        _run(rates, c, prompt_tokens=10, prefill_s=500.0, new_tokens=3, decode_s=3000.0)
    assert rates.s_per_token("p") == zero_gpu.S_PER_TOKEN_RANGE[1]  # "a" dropped out; the rest clamped
    assert rates.s_per_prompt_token("p") == zero_gpu.S_PER_PROMPT_TOKEN_RANGE[1]


def test_a_long_prompt_asks_for_its_own_prefill():
    # 99,000 characters counted as 49,500 tokens, at 0.1 ms a token: 4.95 s on top of setup.
    tokens = zero_gpu.prompt_tokens("x" * 99_000)
    assert tokens == 49_500
    assert grant_s(0, 0.03, prompt_tokens=tokens, s_per_prompt_token=1e-4) == 13  # 8 + 4.95
    assert grant_s(0, 0.03, prompt_tokens=0, s_per_prompt_token=1e-4) == MIN_GRANT_S


def test_a_finished_trace_tells_the_rates_its_prefill_and_its_decoding():
    from specviz.events import RunSummary

    class Event:
        t_end_s = 0.5  # the first token, from the prefill of 250 prompt tokens

    class Trace:
        events = [Event()]
        summary = RunSummary(new_tokens=11, wall_s=1.5)
        meta = {"prompt_tokens": 250}

    before = zero_gpu.RATES
    zero_gpu.RATES = Rates()
    try:
        zero_gpu.observe_trace("p", Trace(), "s")
        assert zero_gpu.RATES.s_per_token("p") == pytest.approx(0.1)  # 1 s for the 10 tokens after the first
        assert zero_gpu.RATES.s_per_prompt_token("p") == pytest.approx(0.002)
    finally:
        zero_gpu.RATES = before


def test_the_batching_lab_asks_for_what_its_sizes_need(monkeypatch):
    from specviz.workshop.labs import batching, panels

    monkeypatch.setattr(zero_gpu, "RATES", Rates())
    # With the prior rates: 24.73 s (see tests/test_deploy.py for the sum).
    assert panels.batch_grant_s("p") == 25
    # One batch size of one sequence, one pass size, one sweep after the warm-ups: fewer passes.
    passes, prefill = batching.pass_plan((1,), (1,), repeats=1, context=10)
    assert passes == [1, 1, 1, 1, 1, 1]  # 3 sweeps, each a target and a draft pass of one token
    assert prefill == 20
    # A faster pair asks for less, down to the least grant.
    fast = Rates()
    for i in range(3):
        _run(fast, f"v{i}", prompt_tokens=1000, prefill_s=0.01, new_tokens=101, decode_s=0.5)
    monkeypatch.setattr(zero_gpu, "RATES", fast)
    # 112 passes at 5 ms, 4,800 context tokens at 0.01 ms, times 1.5, and 11 s: 11.91 s.
    assert panels.batch_grant_s("p") == 12 < 25


def test_a_hostile_run_through_the_runner_does_not_move_the_next_visitors_grant(monkeypatch):
    """As a visitor would: a finished run told to the runner (`runner._finished`, what every
    run of the page and the API ends in), then the grant the next visitor's run asks for."""
    from types import SimpleNamespace

    from specviz.app import runner
    from specviz.app.config import PageConfig
    from specviz.events import RunSummary
    from specviz.settings import GenerationSettings

    monkeypatch.setattr(zero_gpu, "ON_ZERO_GPU", True)
    monkeypatch.setattr(zero_gpu, "RATES", Rates())

    def trace(prefill_s: float, wall_s: float, new_tokens: int, prompt_tokens: int):
        return SimpleNamespace(
            events=[SimpleNamespace(t_end_s=prefill_s)],
            summary=RunSummary(new_tokens=new_tokens, wall_s=wall_s, stop_reason="eos"),
            meta={"prompt_tokens": prompt_tokens},
            token_ids=[1] * new_tokens,
        )

    for i in range(3):  # three visitors' runs: 20 ms a token after a 40 ms prefill
        runner._finished(trace(0.04, 0.04 + 63 * 0.02, 64, 20), "p", f"honest{i}", remember=False)
    config, settings = PageConfig(max_wall_s=300), GenerationSettings(max_new_tokens=256)
    before = runner.run_wall_s(config, settings, "p", "Write a function that reverses a string")
    # 99,000 characters and one new token, twice in one session, then from two more sessions
    for session in ("hostile", "hostile", "hostile2"):
        runner._finished(trace(30.0, 30.0, 1, 49_500), "p", session, remember=False)
    after = runner.run_wall_s(config, settings, "p", "Write a function that reverses a string")
    assert after == before == zero_gpu.run_limit_s(16)  # 8 s + 256 x 1.5 x 20 ms + the prompt: 15.7 s
    assert after < zero_gpu.run_limit_s(MAX_GRANT_S)
