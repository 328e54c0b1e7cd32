"""A page session's earlier outputs (the suffix drafter's corpus beyond the request): kept per
session and per pair, the newest few, and never handed to another session."""

from specviz.app.session_outputs import SessionOutputs


def test_outputs_stay_with_their_session_and_pair():
    kept = SessionOutputs()
    kept.add("alice", "qwen-coder", [1, 2, 3])
    kept.add("bob", "qwen-coder", [7, 8, 9])
    kept.add("alice", "smol-qwen", [4, 5])
    assert kept.get("alice", "qwen-coder") == [[1, 2, 3]]
    assert kept.get("bob", "qwen-coder") == [[7, 8, 9]]
    assert kept.get("alice", "smol-qwen") == [[4, 5]]
    assert kept.get("carol", "qwen-coder") == []
    assert kept.get("bob", "smol-qwen") == []


def test_only_the_newest_runs_are_kept_and_a_caller_cannot_change_them():
    kept = SessionOutputs(runs=2)
    for run in ([1, 2], [3, 4], [5, 6]):
        kept.add("s", "p", run)
    got = kept.get("s", "p")
    assert got == [[3, 4], [5, 6]]
    got[0].append(99)
    assert kept.get("s", "p") == [[3, 4], [5, 6]]


def test_a_run_of_fewer_than_two_tokens_has_nothing_to_follow():
    kept = SessionOutputs()
    kept.add("s", "p", [5])
    kept.add("s", "p", [])
    assert kept.get("s", "p") == []


def test_the_least_recently_used_session_goes_first():
    kept = SessionOutputs(sessions=2)
    kept.add("a", "p", [1, 2])
    kept.add("b", "p", [3, 4])
    kept.add("a", "p", [5, 6])  # a is now the most recent
    kept.add("c", "p", [7, 8])
    assert kept.get("b", "p") == []
    assert kept.get("a", "p") == [[1, 2], [5, 6]]
    assert kept.get("c", "p") == [[7, 8]]
