"""Many users at once on the bundled pair, against `python app.py` launched for real.

One user first runs each prompt alone (the bundled pair through the API on llama.cpp, the
runtime a CPU user meets). Then eight gradio_client sessions each stream a greedy generation of 8 new tokens at the
same moment. Every one completes with exactly the tokens a single user gets for its prompt;
those still waiting are told their place in the queue; the models are loaded once (the app
process's memory stays flat across the sessions); and users beyond the queue's size are
told the app is busy instead of hanging.

The queue holds 7 waiting runs (SPECVIZ_QUEUE_SIZE=7) besides the one running, so the 8
sessions fit and a 9th and 10th arriving while they wait are refused.
"""

from __future__ import annotations

import threading
import time

import psutil
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError, Status

from app_server import launched_app
from specviz.models.catalogue.presets import QWEN_CODER_DRAFT, QWEN_CODER_TARGET
from specviz.events import Trace

pytestmark = [pytest.mark.bundled, pytest.mark.app]

USERS = 8
NEW_TOKENS = 8
PROMPTS = [
    "Write a Python function that reverses a string.",
    "Write a Python function that checks whether a number is prime.",
    "Explain what a hash map is in one sentence.",
    "Write a SQL query that counts the rows of a table named users.",
    "Write a bash command that lists the five largest files in a folder.",
    "Write a JavaScript function that returns the maximum of an array.",
    "What does the Python keyword yield do?",
    "Write a Python one-liner that sums the squares of 1 to 10.",
]
# The bundled pair on llama.cpp, the runtime `auto` picks on a CPU (the GGUF files, mapped once):
# a second copy of the models would add about their size.
MODELS_BYTES = QWEN_CODER_DRAFT.size + QWEN_CODER_TARGET.size


def request(client: Client, prompt: str):
    return client.submit(
        api_name="/generate",
        prompt=prompt,
        k=4,
        temperature=0.0,
        top_p=1.0,
        max_new_tokens=NEW_TOKENS,
        seed=0,
        mode="speculative",
        drafter="model",
        policy="fixed",  # k = 4 every round: on a small CPU the cost-aware default drafts nothing
    )


def final_trace(job) -> Trace:
    job.result()  # raises the app's error, if any
    outputs = job.outputs()
    assert len(outputs) >= 2, "the run streamed (a trace per round, then the finished one)"
    return Trace.from_json(outputs[-1])


def app_rss() -> int:
    """Resident memory of the launched app (this test's child processes running app.py)."""
    procs = [p for p in psutil.Process().children(recursive=True) if "app.py" in " ".join(p.cmdline())]
    assert procs, "the app process is not running"
    return sum(p.memory_info().rss for p in procs)


def test_eight_users_at_once_each_get_their_own_result_and_the_ninth_is_told_busy():
    env = {
        "SPECVIZ_QUEUE_SIZE": str(USERS - 1),
        "SPECVIZ_ALLOW_CUSTOM_MODELS": "0",
        "SPECVIZ_PRELOAD": "1",
        "SPECVIZ_RUNTIME": "llama.cpp",
        "SPECVIZ_DTYPE": "",
    }
    with launched_app(env, "app-load") as url:
        # One user at a time: the reference result for each prompt (the first also waits for the load).
        single = Client(url, verbose=False)
        singles = [final_trace(request(single, p)) for p in PROMPTS]
        reference = [t.token_ids for t in singles]
        assert all(len(ids) == NEW_TOKENS for ids in reference)
        # The bundled pair through the API as one user gets it: the page's own pair, the 0.5B
        # draft agreeing with the 1.5B target on easy code, and code in the answers.
        assert {t.pair for t in singles} == {"qwen-coder"}
        assert sum(t.summary.accepted for t in singles) > 0
        assert any("def" in t.text for t in singles), [t.text for t in singles]
        rss_before = app_rss()

        clients = [Client(url, verbose=False) for _ in range(USERS)]  # one session each
        started = time.monotonic()
        jobs = [request(c, p) for c, p in zip(clients, PROMPTS)]
        ranks: list[set[int]] = [set() for _ in jobs]
        watching = threading.Event()

        def watch() -> None:  # what each user is told while waiting: their place in the queue
            while not watching.is_set():
                for i, job in enumerate(jobs):
                    status = job.status()
                    if status.code == Status.IN_QUEUE and status.rank is not None:
                        ranks[i].add(status.rank)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        while sum(job.status().code in (Status.IN_QUEUE, Status.PROCESSING, Status.ITERATING) for job in jobs) < USERS:
            time.sleep(0.05)  # every session's run is in the queue (or running)

        extra = [request(Client(url, verbose=False), PROMPTS[0]) for _ in range(2)]
        for job in extra:
            with pytest.raises((QueueError, AppError), match="(?i)queue is full|busy"):
                job.result(timeout=60)

        results = [final_trace(job) for job in jobs]
        watching.set()
        watcher.join()
        duration = time.monotonic() - started
        rss_after = app_rss()

        for i, (trace, ids) in enumerate(zip(results, reference)):
            assert trace.prompt == PROMPTS[i] and trace.token_ids == ids, (
                f"user {i} got someone else's or a different result"
            )
        waited = [max(r) for r in ranks if r]
        assert waited and max(waited) >= 1, "users who wait are told their place in the queue"
        growth = rss_after - rss_before
        print(
            f"\n{USERS} users x {NEW_TOKENS} tokens in {duration:.1f} s; app RSS {rss_before / 1e9:.2f} GB -> "
            f"{rss_after / 1e9:.2f} GB ({growth / 1e6:+.0f} MB; one more copy of the models would be {MODELS_BYTES / 1e9:.1f} GB); "
            f"queue places seen: {sorted(set().union(*ranks))}"
        )
        assert growth < MODELS_BYTES / 10, "memory grew by a sizeable part of another copy of the models"

        # The app still serves normally afterwards.
        assert final_trace(request(single, PROMPTS[0])).token_ids == reference[0]
