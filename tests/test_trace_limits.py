"""A trace from outside is bounded by its schema (`specviz.events`): each hostile trace below
is refused in one line that names the limit and the value, before the work that would grow
with it, and a good trace still loads afterwards. The schema is exported as JSON Schema
(docs/trace.schema.json, `python -m specviz schema`).

The hostile traces are built here from a recorded one (tests/data), so no model is loaded.
"""

from __future__ import annotations

import json
import threading
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz import viz
from specviz.engine import position_info
from specviz.errors import UserError
from specviz.events import (
    MAX_EVENTS,
    MAX_JSON_CONTAINERS,
    MAX_JSON_VALUES,
    MAX_RUN_S,
    MAX_TEXT_CHARS,
    MAX_TOKEN_CHARS,
    MAX_TOP_TOKENS,
    MAX_TRACE_BYTES,
    MAX_TREE_NODES,
    Trace,
    TraceError,
    load_trace,
    schema_text,
    trace_schema,
)
from specviz.settings import SettingsError, from_request

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
# Generous: refusing costs milliseconds; a second only shows nothing grows with the value
# (the 600-node tree's n^2 mask, a 2,000,000-deep path, 10^12 s of replay).
CPU_S = 1.0


def recorded(name: str = "greedy") -> dict:
    return json.loads((DATA / f"viz_trace_{name}.json").read_text())


def node(i: int, depth: int = 1, parent: int = -1) -> dict:
    return {"parent": parent, "token": 5, "text": "a", "depth": depth, "q": 0.5, "p": None, "decision": "unchecked"}


def with_round(**changes) -> dict:
    d = recorded()
    d["events"][0].update(changes)
    return d


def with_drafted_text(text: str) -> dict:
    d = recorded()
    d["events"][0]["drafted"][0]["text"] = text
    return d


def compact_rounds(n: int) -> bytes:
    """A trace of n rounds written as compactly as JSON allows: about 3 bytes each."""
    head = json.dumps({k: v for k, v in recorded().items() if k != "events"})[:-1]
    return (head + ', "events": [' + ",".join(["{}"] * n) + "]}").encode()


HOSTILE = [
    (
        "one node at depth 2,000,000",
        with_round(tree=[node(0, depth=2_000_000)]),
        "trace.events[0].tree[0].depth is 2000000; the limit is 128",
    ),
    (
        "a flat 600-node tree",
        with_round(tree=[node(i) for i in range(600)]),
        "trace.events[0].tree has 600 tree nodes; the limit is 128",
    ),
    ("t_end_s of 10^12 s", with_round(t_end_s=1e12), "trace.events[0].t_end_s is 1e+12; the limit is 86400"),
    ("a NaN time", with_round(t_end_s=float("nan")), "trace.events[0].t_end_s is nan; expected a finite number"),
    (
        "an infinite duration",
        with_round(verify_ms=float("inf")),
        "trace.events[0].verify_ms is inf; expected a finite number",
    ),
    ("a negative duration", with_round(draft_ms=-5.0), "trace.events[0].draft_ms is -5; the least allowed is 0"),
    (
        "a 100,000-character token",
        with_drafted_text("x" * 100_000),
        "trace.events[0].drafted[0].text has 100000 characters; the limit is 256",
    ),
    (
        "a 10^6-character prompt",
        {**recorded(), "prompt": "p" * 1_000_000},
        f"trace.prompt has 1000000 characters; the limit is {MAX_TEXT_CHARS}",
    ),
    (
        "10^5 token ids",
        {**recorded(), "token_ids": [1] * 100_000},
        "trace.token_ids has 100000 token ids; the limit is 1024",
    ),
    (
        "a token id past any vocabulary",
        {**recorded(), "token_ids": [10**40]},
        "trace.token_ids[0] is a 41-digit number; it must be under 2147483648",
    ),
    (
        "a parent outside the tree",
        with_round(tree=[node(0, parent=10**9)]),
        "trace.events[0].tree[0].parent is 1000000000; it must be under 128",
    ),
    (
        "a node under a later node",
        with_round(tree=[node(0, parent=1), node(1)]),
        "trace.events[0].tree: node 0 has parent 1: a parent is -1 or an earlier node",
    ),
    (
        "a depth its parent contradicts",
        with_round(tree=[node(0), node(1, depth=5, parent=0)]),
        "trace.events[0].tree: node 1 is at depth 5; under its parent it is at 2",
    ),
    (
        "40 top tokens at a position",
        with_round(
            positions=[
                {"top": [{"id": 1, "text": "a", "p": 0.1, "q": 0.1}] * 40, "overlap": 0.5, "top2_logit_gap": 1.0}
            ]
        ),
        f"trace.events[0].positions[0].top has 40 top tokens; the limit is {MAX_TOP_TOKENS}",
    ),
]


def refusal(data) -> tuple[str, float]:
    """The one line a trace is refused with, and the CPU seconds it took."""
    started = time.process_time()
    with pytest.raises(TraceError) as err:
        load_trace(data)
    return str(err.value), time.process_time() - started


def assert_good_trace_loads() -> None:
    trace = load_trace((DATA / "viz_trace_sampled.json").read_bytes())
    assert trace.events and trace.summary.new_tokens == len(trace.token_ids)


@pytest.mark.parametrize("what, d, line", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_each_limit_is_refused_in_one_line_naming_it_and_the_value(what, d, line):
    """Within CPU_S of CPU (a generous bound against an O(n^2) blow-up, not a speed test)."""
    message, cpu_s = refusal(json.dumps(d).encode())
    assert message == line
    assert cpu_s < CPU_S, f"{what}: {cpu_s:.2f} s of CPU"
    assert_good_trace_loads()


def test_a_million_rounds_written_compactly_are_refused_by_the_event_limit():
    """3 MB of `{}` rounds: under the file's size limit, refused on their count before any
    round is checked (within CPU_S of CPU, generous: it shows no work per round beyond parsing)."""
    data = compact_rounds(1_000_000)
    assert len(data) < MAX_TRACE_BYTES
    message, cpu_s = refusal(data)
    assert message == f"trace.events has 1000000 events; the limit is {MAX_EVENTS}"
    assert cpu_s < CPU_S
    with pytest.raises(TraceError, match="trace.events has 1000000 events"):
        Trace.from_json(data)  # the same schema without the size limit
    assert_good_trace_loads()


def test_a_file_of_empty_containers_is_refused_before_parsing():
    """32 MB of `[]` would parse into 10^7 lists (hundreds of MB): refused on a count of the
    brackets, within CPU_S of CPU (generous: the count is one pass over the bytes)."""
    data = b"[" + b"[]," * ((MAX_TRACE_BYTES - 2) // 3 - 1) + b"[]]"
    message, cpu_s = refusal(data)
    assert message == f"the trace has {data.count(b'[')} objects and lists; the limit is {MAX_JSON_CONTAINERS}"
    assert cpu_s < CPU_S
    assert_good_trace_loads()


def test_a_file_over_the_size_limit_is_refused_before_reading_it(tmp_path):
    """The upload handler checks the file's size on disk before it reads a byte: a sparse
    file 1 MB over the limit is refused at once."""
    from specviz.app import traces

    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_TRACE_BYTES + (1 << 20))
    started = time.process_time()
    with pytest.raises(Exception, match=r"the trace is 33\.0 MB; the limit is 32\.0 MB"):
        traces.read_upload(str(big))
    assert time.process_time() - started < CPU_S
    good = tmp_path / "good.json"
    good.write_bytes((DATA / "viz_trace_greedy.json").read_bytes())
    assert traces.read_upload(str(good)).events


def test_the_replay_has_a_bounded_number_of_frames_whatever_the_times_say():
    for end in (0.35, 120.0, MAX_RUN_S, 1e12):
        for speed in (1.0, 10.0):
            times = viz.replay_times(end, speed)
            assert len(times) <= 1201 and times[0] == 0.0 and times[-1] == end
            assert all(a < b for a, b in zip(times, times[1:]))
    assert viz.replay_times(0.35, 1.0) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.35])  # real time, 100 ms a frame
    assert viz.replay_times(float("nan"), 1.0) == viz.replay_times(5.0, float("inf")) == [0.0]


def test_the_replay_takes_only_the_offered_speeds():
    from specviz.app.compare import replay_speed

    assert replay_speed(None) == 1.0 and replay_speed(4) == 4.0
    refused = [
        (0.001, "replay speed 0.001;"),
        (-1.0, "replay speed -1.0;"),
        (float("nan"), "replay speed nan;"),
        ("fast", "replay speed str;"),
        (True, "replay speed True;"),
    ]
    for bad, words in refused:
        with pytest.raises(UserError, match=words + " the speeds offered are 1, 2, 4, 10"):
            replay_speed(bad)


def largest(name: str, upto: int = 10_000) -> int:
    """The largest value of a whole-number setting that `from_request` accepts."""
    best = 0
    for v in range(1, upto):
        try:
            from_request({name: v})
        except SettingsError:
            if best:
                return best
        else:
            best = v
    raise AssertionError(f"{name} accepts {upto}: no upper bound")


def test_the_bounds_hold_what_the_drafters_and_the_engine_produce():
    """A real trace never meets a limit: each bound is at least what the settings allow."""
    lookahead = largest("lookahead_candidates") * (largest("lookahead_ngram") - 1)  # a trie of G n-grams of N - 1
    assert MAX_TREE_NODES >= max(largest("tree_nodes"), largest("suffix_max_nodes"), largest("k"), lookahead)
    assert MAX_EVENTS >= largest("max_new_tokens")
    assert MAX_TOP_TOKENS >= 2 * position_info.TOP  # the union of p's and q's top tokens


def test_the_longest_token_of_a_prepared_vocabulary_fits():
    """A byte-level vocabulary spells each byte as one character, so its longest entry bounds
    a token's text (the bundled Qwen's is 128)."""
    from specviz.models.files.cache import cache_root

    files = sorted(cache_root().glob("models/*/tokenizer.json"))
    if not files:
        pytest.skip("no prepared model pair here")
    for path in files:
        vocab = json.loads(path.read_text())["model"]["vocab"]  # BPE: {piece: id}; unigram: [[piece, score]]
        pieces = vocab if isinstance(vocab, dict) else [piece for piece, _ in vocab]
        assert max(map(len, pieces)) <= MAX_TOKEN_CHARS, path


def test_older_traces_still_load():
    """Settings recorded before the draft-length policy say `adaptive`; fields added since
    take their defaults."""
    d = recorded()
    assert d["settings"]["adaptive"] is False and "policy" not in d["settings"]
    assert load_trace(json.dumps(d)).settings["policy"] == "fixed"
    d["settings"]["adaptive"] = True
    assert load_trace(json.dumps(d)).settings["policy"] == "cost-aware"
    assert "policy" not in d["summary"] and load_trace(json.dumps(d)).summary.policy == ""
    assert all(not e["tree"] for e in load_trace(json.dumps(d)).to_dict()["events"])


def test_the_committed_schema_is_the_generated_one():
    committed = (ROOT / "docs" / "trace.schema.json").read_text()
    assert committed == schema_text(), "regenerate it: python -m specviz schema --out docs/trace.schema.json"
    out = subprocess.run(
        [sys.executable, "-m", "specviz", "schema"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout == committed


def test_the_schema_accepts_every_recorded_trace_and_states_the_limits():
    jsonschema = pytest.importorskip("jsonschema")
    schema = trace_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in ("greedy", "sampled", "plain"):
        jsonschema.validate(recorded(name), schema)
    tree = schema["$defs"]["RoundEvent"]["properties"]["tree"]
    assert tree["maxItems"] == MAX_TREE_NODES
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(with_round(tree=[node(i) for i in range(600)]), schema)


def test_a_replay_of_a_day_long_race_draws_a_bounded_number_of_frames(monkeypatch):
    """The page's replay loop over two traces whose last round ends a day in: at most
    MAX_REPLAY_FRAMES + 1 frames, the last one showing both runs done (sleeps skipped here)."""
    from specviz.app import compare

    slept, here, real_sleep = [], threading.current_thread(), compare.time.sleep

    def sleep(s: float) -> None:  # `time` is one module: another test's threads may sleep meanwhile
        slept.append(s) if threading.current_thread() is here else real_sleep(s)

    monkeypatch.setattr(compare.time, "sleep", sleep)
    spec, plain = recorded("greedy"), recorded("plain")
    spec["events"][-1]["t_end_s"] = MAX_RUN_S
    frames = list(compare.Comparisons.replay(load_trace(json.dumps(spec)), load_trace(json.dumps(plain)), 1.0))
    assert len(frames) == len(slept) == viz.race.MAX_REPLAY_FRAMES + 1
    assert frames[-1][0].count("done:") == frames[-1][1].count("done:") == 1
    assert "done:" not in frames[0][0]


def test_the_largest_run_the_settings_allow_fits_the_file_limits():
    """MAX_EVENTS rounds of the biggest lookahead round (G x (N - 1) tree nodes, its window and
    n-grams, every position's top tokens), texts of typical length: under the byte and
    container limits, as `generate --json` and a download write it."""
    g, n, w = largest("lookahead_candidates"), largest("lookahead_ngram"), largest("lookahead_window")
    word = "token_"
    tree = [
        {
            "parent": -1 if d == 0 else i - 1,
            "token": 1000,
            "text": word,
            "depth": d + 1,
            "q": 0.5,
            "p": 0.25,
            "decision": "unchecked",
        }
        for i, d in enumerate(d for _ in range(g) for d in range(n - 1))
    ]
    top = [{"id": 1000 + i, "text": word, "p": 0.1, "q": 0.1} for i in range(2 * position_info.TOP)]
    round_ = {
        "index": 1000,
        "k": n - 1,
        "type": "round",
        "draft_ms": 10.5,
        "verify_ms": 100.25,
        "t_end_s": 100.5,
        "new_tokens": 1000,
        "emitted": {"id": 1000, "text": word, "p": 0.5, "kind": "bonus"},
        "drafted": [{"id": 1000, "text": word, "p": 0.5, "q": 1.0, "u": None, "decision": "accepted"}] * (n - 1),
        "positions": [{"top": top, "overlap": 0.5, "top2_logit_gap": 1.5}] * n,
        "tree": tree,
        "alignment": [],
        "source": {
            "method": "lookahead",
            "window": [[word] * w] * (n - 1),
            "ngrams": [[word] * n] * w,
            "origins": ["context"] * len(tree),
            "window_on": True,
            "ride": w * (n - 1),
            "note": "",
            "matched": [],
            "occurrences": 0,
            "counts": [],
        },
    }
    one = Trace.from_dict({**recorded(), "events": [round_ | {"index": 0}]}).to_json()
    per_round = len(json.dumps(round_, ensure_ascii=False).encode())
    assert len(one) + MAX_EVENTS * per_round < MAX_TRACE_BYTES
    assert MAX_EVENTS * (one.count("{") + one.count("[")) < MAX_JSON_CONTAINERS
    assert MAX_EVENTS * (one.count(",") + 1) < MAX_JSON_VALUES


@pytest.mark.parametrize(
    "settings",
    [
        {
            "drafter": "lookahead",
            "lookahead_window": 16,
            "lookahead_ngram": 8,
            "lookahead_candidates": 16,
            "policy": "fixed",
        },
        {"drafter": "suffix", "suffix_max_nodes": 64, "suffix_min_score": 0.0, "policy": "fixed"},
        {"drafter": "suffix", "suffix_max_nodes": 64, "policy": "cost-aware"},
        {"drafter": "tree", "tree_nodes": 64, "tree_width": 8, "k": 16, "policy": "fixed"},
    ],
    ids=["lookahead-16x8", "suffix-64", "suffix-cost-aware", "tree-64x8"],
)
@pytest.mark.usefixtures("single_thread")
def test_real_runs_at_the_largest_settings_load_back_unchanged(settings):
    """The tiny pair on a repetitive prompt, so the drafters build big trees (lookahead's pass
    past 64 nodes in longer runs) and the draft-free ones write their notes."""
    from specviz.engine import run

    prompt = "abc abc abc abc abc def reverse(s): return s[::-1] def reverse(s): return s[::-1] def reverse(s):" * 3
    trace = run(tiny_pair("same"), prompt, from_request({"max_new_tokens": 32, **settings}))
    assert any(e.tree or (e.source is not None and e.source.note) for e in trace.events)
    assert load_trace(trace.to_json()) == trace
