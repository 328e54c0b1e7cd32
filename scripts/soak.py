"""Soak: the app under a class of visitors for minutes on end, through its public API.

    scripts/soak.sh [--pair NAME_OR_SPEC] [--minutes M] [--users U] [--json]
                    [--hostile [--alone-minutes A]] [--public] [--curve PREFIX]

Launches `python app.py` on 127.0.0.1 (a free port) with the pair, waits until a first run
has been served, times single runs one after another, then U gradio_client users (one
session each) loop for M minutes: the page's example prompts, greedy and sampled, the fixed
and the cost-aware policy, plain decoding, a few runs cancelled mid-run (Job.cancel), a few
abandoned (the connection dropped after the first update) and a few invalid requests. It
reports completed, cancelled, refused and failed requests, the queue wait (submit to the
first streamed update), the app's memory, threads, open files and temporary folders at
start and end, and whether every greedy run repeated the first run of the same request.
Exits 1 when a request failed or a greedy run differed.

With --hostile the crowd runs twice: the honest users alone for A minutes (the warm-up; M
unless --alone-minutes says), then the same users for M minutes beside one hostile client
that sends tests/hostile_cases.py's requests (metrics payloads, k_max, p and q, the sweep,
prompts, trace uploads) one after another. The report's
"hostile" part says how the honest users fared beside it: their failures, their p95 queue
wait against the soak without it, and the app's memory from the start of that phase to its
end; and how the hostile requests were answered (refused in one line, how fast). The goals
(0 honest failures, p95 within 20 %, memory within 5 %, every refusal within 1 s) are reported,
not asserted.

With --public the app is a public page behind one trusted proxy (SPECVIZ_PUBLIC=1,
SPECVIZ_TRUSTED_HOPS=1), and every client writes the X-Forwarded-For entry that proxy would add:
each honest user, the single runs and the hostile client are visitors of their own, as they
would be on a Space, so each visitor's shares and the door of app/strikes.py apply to them. A
local page ignores the header: there every request is the same visitor's, told apart by session.

The target runs in fp32 unless --dtype says otherwise: greedy identity across runs is
claimed only there (the cost-aware policy times its own rounds, so two runs may verify
different draft lengths, and in bf16 a different pass size can round a near-tie the other
way).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

import httpx  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from app_server import launched_app  # noqa: E402
from specviz.models.catalogue.presets import DEFAULT_PAIR  # noqa: E402

EXAMPLES = ROOT / "assets" / "examples.json"
ANSWER_TIMEOUT_S = 600  # a request with no answer by then is a failure
FIRST_RUN_TIMEOUT_S = 1800  # the first run waits for the pair to load (assembling it can take minutes)
SETTLE_S = 15  # idle time before counting threads and files (anyio retires idle workers after 10 s)
SAMPLE_EVERY_S = 2.0
POLL_S = 0.05
THINK_S = (0.5, 3.0)  # a user reads the result before the next run
SOLO_RUNS = 12  # each example prompt once or twice; greedy and sampled, fixed and cost-aware alike; 2 plain (1/6)
# Per request: cancelled mid-run, abandoned, invalid; the rest are normal runs.
P_CANCEL, P_ABANDON, P_INVALID = 0.05, 0.04, 0.03
P_PLAIN = 1 / 6
BUSY_WORDS = ("queue is full", "busy")
SOLO_ADDRESS, HOSTILE_ADDRESS = "10.1.0.1", "203.0.113.7"  # the visitors' addresses, as the proxy names them


def user_address(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250 + 1}"


def forwarded(address: str) -> dict[str, str]:
    """The header a trusted proxy adds; a local page (no trusted hops) ignores it."""
    return {"X-Forwarded-For": address}


_API_INPUTS: dict[str, list[tuple[str, object]]] = {}


def api_data(url: str, values: dict) -> list:
    """The generate endpoint's positional inputs for a raw HTTP call: `values` by name, every
    other input its default, in the order the app's own API description gives."""
    if url not in _API_INPUTS:
        client = Client(url, verbose=False, headers=forwarded(SOLO_ADDRESS))
        try:
            params = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/generate"]
        finally:
            client.close()
        _API_INPUTS[url] = [(p["parameter_name"], p.get("parameter_default")) for p in params["parameters"]]
    return [values.get(name, default) for name, default in _API_INPUTS[url]]


INVALID = [
    ({"k": 99}, "k must be"),
    ({"temperature": -1.0}, "temperature must be"),
    ({"prompt": "   "}, "prompt is empty"),
    ({"top_p": 0.0}, "top-p must be"),
]


# --- the app process, seen from /proc -------------------------------------------------------


def app_pid() -> int:
    """The launched app.py: this process's child running it."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and any(part.endswith(b"app.py") for part in cmdline):
            return int(entry.name)
    raise RuntimeError("the app process was not found")


@dataclass
class Usage:
    rss_mb: float
    threads: int
    open_files: int
    temp_dirs: int


def usage(pid: int, temp: Path) -> Usage:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss_kb = int(status["VmRSS"].split()[0])
    dirs = sum(len(d) for _, d, _ in os.walk(temp))
    return Usage(rss_kb / 1024, int(status["Threads"]), len(os.listdir(f"/proc/{pid}/fd")), dirs)


class Sampler(threading.Thread):
    """The app's usage every SAMPLE_EVERY_S: the highest RSS and thread count, one sample a
    minute, and the memory curve (seconds since the start, MB) with the phases' start times."""

    def __init__(self, pid: int, temp: Path, start: Usage):
        super().__init__(daemon=True, name="usage sampler")
        self.pid, self.temp, self.stop = pid, temp, threading.Event()
        self.max_mb, self.max_threads, self.by_minute = start.rss_mb, start.threads, [start]
        self.t0 = time.monotonic()
        self.curve: list[tuple[float, float]] = [(0.0, start.rss_mb)]
        self.phases: list[tuple[str, float]] = []

    def mark(self, phase: str) -> None:
        self.phases.append((phase, round(time.monotonic() - self.t0, 1)))

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_EVERY_S):
            try:
                u = usage(self.pid, self.temp)
            except (OSError, KeyError):
                return
            now = time.monotonic() - self.t0
            self.curve.append((round(now, 1), round(u.rss_mb, 1)))
            self.max_mb, self.max_threads = max(self.max_mb, u.rss_mb), max(self.max_threads, u.threads)
            if now >= 60 * len(self.by_minute):
                self.by_minute.append(u)


# --- requests -------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # completed, cancelled, abandoned, refused, failed
    key: tuple | None = None  # the greedy request's identity, for the identity check
    tokens: list[int] | None = None
    wait_s: float | None = None  # submit to first streamed update
    run_s: float | None = None  # submit to the finished trace
    wall_s: float | None = None  # the run's own time at the server (its trace's wall_s)
    submitted: float | None = None  # monotonic times, for counting the runs served ahead of this one
    first_at: float | None = None
    detail: str = ""


def load_prompts() -> list[str]:
    return [e["prompt"] for e in json.loads(EXAMPLES.read_text(encoding="utf-8"))["examples"]]


def plan_request(rng: random.Random, prompts: list[str], max_new_tokens: int) -> dict:
    """A normal run: an example prompt, greedy or sampled, fixed or cost-aware, now and then plain."""
    greedy = rng.random() < 0.5
    fixed = rng.random() < 0.5
    return dict(
        prompt=rng.choice(prompts),
        temperature=0.0 if greedy else 0.7,
        top_p=1.0 if greedy else 0.9,
        seed=rng.randrange(4),
        policy="fixed" if fixed else "cost-aware",
        k=4 if fixed else 8,
        mode="plain" if rng.random() < P_PLAIN else "speculative",
        max_new_tokens=max_new_tokens,
    )


def solo_request(i: int, prompts: list[str], max_new_tokens: int) -> dict:
    """The i-th of the single runs: the mix of plan_request, in equal parts rather than by chance."""
    greedy, fixed = i % 2 == 0, (i // 2) % 2 == 0
    return dict(
        prompt=prompts[i % len(prompts)],
        temperature=0.0 if greedy else 0.7,
        top_p=1.0 if greedy else 0.9,
        seed=i % 4,
        policy="fixed" if fixed else "cost-aware",
        k=4 if fixed else 8,
        mode="plain" if i % 6 == 5 else "speculative",
        max_new_tokens=max_new_tokens,
    )


def greedy_key(req: dict) -> tuple | None:
    if req.get("temperature", 0.0) != 0.0:
        return None
    return (req["prompt"], req["mode"], req["policy"], req["k"], req["max_new_tokens"])


def wait_first(job, deadline: float) -> float | None:
    """When (monotonic) the job's first streamed update arrived; None if it ended or timed out first."""
    while time.monotonic() < deadline:
        if job.outputs():
            return time.monotonic()
        if job.done():
            return None
        time.sleep(POLL_S)
    return None


def answered(job, deadline: float) -> bool:
    while not job.done():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def error_outcome(e: BaseException, expect: str | None = None) -> Outcome:
    text = str(e)
    one_line = "\n" not in text.strip() and "Traceback" not in text
    if expect is not None and expect in text and one_line:
        return Outcome("refused", detail=text)
    if expect is None and one_line and any(w in text.lower() for w in BUSY_WORDS):
        return Outcome("refused", detail=text)
    return Outcome("failed", detail=f"{type(e).__name__}: {text[:300]}")


def run_once(client: Client, req: dict, *, cancel_after_s: float | None = None) -> Outcome:
    """One request through gradio_client; cancelled `cancel_after_s` after its first update if given."""
    key = greedy_key(req)
    t0 = time.monotonic()
    deadline = t0 + ANSWER_TIMEOUT_S
    job = client.submit(api_name="/generate", **req)
    first = wait_first(job, deadline)
    wait_s = None if first is None else first - t0
    if cancel_after_s is not None and first is not None and not job.done():
        time.sleep(cancel_after_s)
        if not job.done():
            job.cancel()
            if not answered(job, time.monotonic() + 120):
                return Outcome("failed", wait_s=wait_s, detail="a cancelled job did not end within 120 s")
            return Outcome("cancelled", wait_s=wait_s, submitted=t0, first_at=first)
    if not answered(job, deadline):
        job.cancel()
        return Outcome("failed", wait_s=wait_s, detail=f"no answer within {ANSWER_TIMEOUT_S} s")
    try:
        job.result()
    except AppError as e:
        return error_outcome(e)
    except Exception as e:  # noqa: BLE001 - anything else is a failure, kept in words
        return error_outcome(e)
    outputs = job.outputs()
    try:
        trace = json.loads(outputs[-1])
        ended = trace["summary"]["stop_reason"]
    except (IndexError, ValueError, KeyError, TypeError):
        return Outcome(
            "failed", wait_s=wait_s, detail=f"the last answer is not a finished trace: {str(outputs[-1:])[:200]}"
        )
    if ended not in ("eos", "max_new_tokens"):
        return Outcome("failed", wait_s=wait_s, detail=f"a run ended by {ended!r}")
    return Outcome(
        "completed",
        key=key,
        tokens=trace["token_ids"],
        wait_s=wait_s,
        run_s=time.monotonic() - t0,
        wall_s=trace["summary"].get("wall_s"),
        submitted=t0,
        first_at=first,
    )


def run_invalid(client: Client, rng: random.Random, req: dict) -> Outcome:
    bad, words = rng.choice(INVALID)
    job = client.submit(api_name="/generate", **{**req, **bad})
    if not answered(job, time.monotonic() + ANSWER_TIMEOUT_S):
        job.cancel()
        return Outcome("failed", detail=f"no answer to an invalid request within {ANSWER_TIMEOUT_S} s")
    try:
        job.result()
    except Exception as e:  # noqa: BLE001
        return error_outcome(e, expect=words)
    return Outcome("failed", detail=f"an invalid request ({bad}) was served")


def run_abandoned(url: str, req: dict, pair: str, address: str) -> Outcome:
    """Start a run over plain HTTP and go away after its first update."""
    data = api_data(url, {"pair": pair, **req})
    t0 = time.monotonic()
    try:
        with httpx.Client(base_url=url, headers=forwarded(address), timeout=ANSWER_TIMEOUT_S) as http:
            event_id = http.post("gradio_api/call/generate", json={"data": data}).json()["event_id"]
            with http.stream("GET", f"gradio_api/call/generate/{event_id}") as stream:
                error = False
                for line in stream.iter_lines():
                    if error and line.startswith("data:"):
                        return error_outcome(RuntimeError(line[5:].strip()))
                    if line.startswith("data:") and "token_ids" in line:
                        now = time.monotonic()
                        return Outcome("abandoned", wait_s=now - t0, submitted=t0, first_at=now)
                    error = error or line.startswith("event: error")
                    if time.monotonic() - t0 > ANSWER_TIMEOUT_S:
                        break
    except (httpx.HTTPError, KeyError, ValueError) as e:
        return Outcome("failed", detail=f"abandoned request: {type(e).__name__}: {e}")
    return Outcome("failed", detail="an abandoned run's stream ended before its first update")


@dataclass
class User:
    index: int
    url: str
    pair: str
    prompts: list[str]
    max_new_tokens: int
    until: float
    max_requests: int
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)

    def loop(self) -> None:
        rng = random.Random(self.seed * 1000 + self.index)
        address = user_address(self.index)
        client = Client(self.url, verbose=False, headers=forwarded(address))
        try:
            while time.monotonic() < self.until and len(self.outcomes) < self.max_requests:
                req = {**plan_request(rng, self.prompts, self.max_new_tokens), "pair": self.pair}
                draw = rng.random()
                try:
                    if draw < P_CANCEL:
                        outcome = run_once(client, req, cancel_after_s=rng.uniform(0.0, 1.0))
                    elif draw < P_CANCEL + P_ABANDON:
                        outcome = run_abandoned(self.url, req, self.pair, address)
                    elif draw < P_CANCEL + P_ABANDON + P_INVALID:
                        outcome = run_invalid(client, rng, req)
                    else:
                        outcome = run_once(client, req)
                except Exception as e:  # noqa: BLE001 - the soak itself must keep going and say what happened
                    outcome = Outcome("failed", detail=f"{type(e).__name__}: {e}")
                self.outcomes.append(outcome)
                time.sleep(rng.uniform(*THINK_S))
        finally:
            client.close()


# --- the soak -------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    i = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[i]


@dataclass
class Ran:
    """What a soak saw, before it is reported."""

    pair: str
    dtype: str
    minutes: float
    alone_minutes: float
    users: int
    max_new_tokens: int
    seed: int
    started_at: str
    settle_s: float = SETTLE_S
    public: bool = False
    first: Outcome | None = None
    solo: list[Outcome] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    stuck: int = 0
    start: Usage | None = None
    end: Usage | None = None
    sampler: Sampler | None = None
    hostile: dict | None = None  # the hostile phase's report


def soak(
    pair: str,
    minutes: float,
    users: int,
    max_new_tokens: int,
    dtype: str,
    seed: int,
    log=print,
    hostile: bool = False,
    alone_minutes: float | None = None,
    settle_s: float = SETTLE_S,
    public: bool = False,
) -> dict:
    work = Path(tempfile.mkdtemp(prefix="specviz-soak-"))
    temp = work / "tmp"
    temp.mkdir()
    env = {
        "SPECVIZ_DEFAULT_PAIR": pair,
        "SPECVIZ_PRELOAD": "1",
        "SPECVIZ_DTYPE": dtype,
        "TMPDIR": str(temp),
        "GRADIO_TEMP_DIR": str(temp / "gradio"),
        "GRADIO_SERVER_NAME": "127.0.0.1",
    }
    if public:
        env |= {"SPECVIZ_PUBLIC": "1", "SPECVIZ_TRUSTED_HOPS": "1"}
    alone = minutes if alone_minutes is None or not hostile else alone_minutes
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ran = Ran(pair, dtype, minutes, alone, users, max_new_tokens, seed, started_at, settle_s, public)
    with launched_app(env, "soak") as url:
        _run_phases(ran, url, temp, hostile, log)
    shutil.rmtree(work, ignore_errors=True)  # the app's temporary folder, counted above
    return report_of(ran)


def _run_phases(ran: Ran, url: str, temp: Path, hostile: bool, log) -> None:
    """The first run, the single runs, the crowd (alone, then beside a hostile client), into `ran`."""
    prompts, pair, users, n = load_prompts(), ran.pair, ran.users, ran.max_new_tokens
    pid = app_pid()
    client = Client(url, verbose=False, headers=forwarded(SOLO_ADDRESS))
    log(f"app on {url} (pid {pid}); waiting for {pair} to load and serve a first run")
    ran.first = run_once_with_timeout(client, {**solo_request(0, prompts, n), "pair": pair})
    if ran.first.kind != "completed":
        raise RuntimeError(f"the first run was not served: {ran.first.kind} {ran.first.detail}")
    time.sleep(ran.settle_s)
    ran.start = usage(pid, temp)
    ran.sampler = sampler = Sampler(pid, temp, ran.start)
    sampler.start()
    sampler.mark("single runs")
    # Single runs one after another: the queue wait's yardstick, and the first greedy results.
    ran.solo = [run_once(client, {**solo_request(i, prompts, n), "pair": pair}) for i in range(SOLO_RUNS)]
    client.close()
    log(f"single run: {_single_run_s(ran.solo) or 0:.2f} s (mean of those completed); {users} users")
    sampler.mark(f"{users} users")
    ran.outcomes, ran.stuck = crowd(url, pair, prompts, n, users, ran.alone_minutes, ran.seed)
    if hostile:
        ran.hostile = hostile_phase(
            url,
            pair,
            prompts,
            n,
            users,
            ran.minutes,
            ran.seed,
            ran.outcomes,
            lambda: usage(pid, temp),
            log,
            lambda: sampler.mark(f"{users} users + 1 hostile client"),
            ran.settle_s,
        )
        ran.outcomes += ran.hostile.pop("outcomes")
        ran.stuck += ran.hostile.pop("stuck")
    time.sleep(ran.settle_s)
    ran.end = usage(pid, temp)
    sampler.stop.set()
    sampler.join()


def _single_run_s(solo: list[Outcome]) -> float | None:
    times = [o.run_s for o in solo if o.kind == "completed"]
    return statistics.mean(times) if times else None


def _greedy(counted: list[Outcome]) -> dict:
    """Whether every greedy run repeated the first run of the same request."""
    reference: dict[tuple, list[int]] = {}
    differing = []
    for o in counted:
        if o.kind == "completed" and o.key is not None:
            ref = reference.setdefault(o.key, o.tokens)
            if o.tokens != ref:
                differing.append(o.key)
    return {
        "greedy_identical": not differing,
        "greedy_keys": len(reference),
        "greedy_runs": sum(o.kind == "completed" and o.key is not None for o in counted),
        "greedy_differing": [list(k[1:]) + [k[0][:40]] for k in sorted(set(differing))][:10],
    }


def _waits(outcomes: list[Outcome], single_run_s: float | None) -> dict:
    """The queue wait, and the yardsticks it is held to."""
    waits = [o.wait_s for o in outcomes if o.wait_s is not None]
    # First come, first served: the runs that started (sent a first update) while a request
    # waited. With U users in turn that is at most U - 1, plus runs abandoned mid-way.
    started = sorted(o.first_at for o in outcomes if o.first_at is not None)
    ahead = [sum(o.submitted < t < o.first_at for t in started) for o in outcomes if o.first_at is not None]
    # "7 runs one after another": the single runs timed alone before the soak, and the runs'
    # own time at the server during it (the same machine under the same outside load).
    walls = [o.wall_s for o in outcomes if o.kind == "completed" and o.wall_s]
    run_under_load_s = statistics.mean(walls) if walls else None
    # The same yardstick run for run: 7 consecutive runs of the soak itself, one after another
    # at the server, in the order they started. Runs differ in length (plain decoding, sampled
    # text of another length), so a wait behind 7 of them varies as these sums do.
    in_order = [
        o.wall_s for o in sorted(outcomes, key=lambda o: o.first_at or 0.0) if o.kind == "completed" and o.wall_s
    ]
    seven_in_a_row = [sum(in_order[i : i + 7]) for i in range(len(in_order) - 6)]
    return {
        "queue_wait_p50_s": _round(percentile(waits, 0.5)),
        "queue_wait_p95_s": _round(percentile(waits, 0.95)),
        "queue_wait_max_s": _round(max(waits) if waits else None),
        "single_run_s": _round(single_run_s),
        "seven_runs_s": _round(7 * single_run_s if single_run_s else None),
        "run_under_load_s": _round(run_under_load_s),
        "seven_runs_under_load_s": _round(7 * run_under_load_s if run_under_load_s else None),
        "seven_in_a_row_p50_s": _round(percentile(seven_in_a_row, 0.5)),
        "seven_in_a_row_p95_s": _round(percentile(seven_in_a_row, 0.95)),
        "runs_ahead_p95": percentile(ahead, 0.95),
        "runs_ahead_max": max(ahead) if ahead else None,
    }


def _usage(r: Ran) -> dict:
    """Memory, threads, open files and temporary folders, at the start, the end and between."""
    by_minute = r.sampler.by_minute
    return {
        "rss_start_mb": round(r.start.rss_mb, 1),
        "rss_end_mb": round(r.end.rss_mb, 1),
        "rss_max_mb": round(max(r.sampler.max_mb, r.end.rss_mb), 1),
        "rss_by_minute_mb": [round(u.rss_mb, 1) for u in by_minute],
        # every SAMPLE_EVERY_S: [seconds since the first run ended, MB]; phases: [name, start seconds]
        "rss_curve": [list(point) for point in r.sampler.curve],
        "phases": [list(phase) for phase in r.sampler.phases],
        "threads_start": r.start.threads,
        "threads_end": r.end.threads,
        "threads_max": r.sampler.max_threads,
        "threads_by_minute": [u.threads for u in by_minute],
        "threads_first_half_max": max(u.threads for u in by_minute[: max(2, (len(by_minute) + 1) // 2)]),
        "open_files_start": r.start.open_files,
        "open_files_end": r.end.open_files,
        "temp_dirs_start": r.start.temp_dirs,
        "temp_dirs_end": r.end.temp_dirs,
    }


def _checks(report: dict) -> dict:
    def within(a: str, b: str) -> bool:
        return report[a] is not None and report[b] is not None and report[a] <= report[b]

    return {
        "no_failures": report["failures"] == 0,
        "greedy_identical": report["greedy_identical"],
        "rss_end_within_3pct": abs(report["rss_end_mb"] - report["rss_start_mb"]) <= 0.03 * report["rss_start_mb"],
        # The server's worker pool grows with the load, to a bound, and keeps its threads: a leak
        # would take the count past what the first half of the soak had reached.
        "threads_not_growing": report["threads_end"] <= report["threads_first_half_max"],
        "open_files_not_growing": report["open_files_end"] <= report["open_files_start"],
        "temp_dirs_not_growing": report["temp_dirs_end"] <= report["temp_dirs_start"],
        "queue_wait_p95_within_7_runs": within("queue_wait_p95_s", "seven_runs_s"),
        "queue_wait_p95_within_7_runs_under_load": within("queue_wait_p95_s", "seven_runs_under_load_s"),
        "queue_wait_p95_within_7_runs_in_a_row_p95": within("queue_wait_p95_s", "seven_in_a_row_p95_s"),
        "first_come_first_served": report["runs_ahead_p95"] is not None
        and report["runs_ahead_p95"] <= report["users"] - 1,
    }


def report_of(r: Ran) -> dict:
    counted = [r.first, *r.solo, *r.outcomes]
    count = {k: sum(o.kind == k for o in counted) for k in ("completed", "cancelled", "abandoned", "refused", "failed")}
    report = {
        "pair": r.pair,
        "dtype": r.dtype,
        "minutes": r.minutes,
        "alone_minutes": r.alone_minutes,
        "users": r.users,
        "max_new_tokens": r.max_new_tokens,
        "seed": r.seed,
        "public": r.public,
        "started_at": r.started_at,
        "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "requests": len(counted),
        **{k: count[k] for k in ("completed", "cancelled", "abandoned", "refused")},
        "failures": count["failed"] + r.stuck,
        "failure_details": sorted({o.detail for o in counted if o.kind == "failed"})[:20]
        + ([f"{r.stuck} users never stopped"] if r.stuck else []),
        **_waits(r.outcomes, _single_run_s(r.solo)),
        **_greedy(counted),
        **_usage(r),
    }
    report["checks"] = _checks(report)
    if r.hostile is not None:
        # The crowd alone over the same minutes: how much of the memory change is the hostile client's.
        before = r.hostile["rss_start_mb"]
        r.hostile["rss_change_without_pct"] = round(100 * (before - r.start.rss_mb) / r.start.rss_mb, 2)
        report["hostile"] = r.hostile
    return report


def crowd(
    url: str, pair: str, prompts: list[str], max_new_tokens: int, users: int, minutes: float, seed: int
) -> tuple[list[Outcome], int]:
    """U honest users for M minutes: their outcomes, and how many never stopped."""
    until = time.monotonic() + minutes * 60
    max_requests = int(minutes * 60 / THINK_S[0]) + 1
    people = [User(i, url, pair, prompts, max_new_tokens, until, max_requests, seed) for i in range(users)]
    threads = [threading.Thread(target=u.loop, name=f"user {u.index}", daemon=True) for u in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=minutes * 60 + ANSWER_TIMEOUT_S + 180)
    return [o for u in people for o in u.outcomes], sum(t.is_alive() for t in threads)


# --- one hostile client beside the honest users ------------------------------------------------

HOSTILE_PAUSE_S = 0.05  # between the hostile client's requests: it sends one after another
GOALS = {"p95_within": 0.20, "rss_within": 0.05, "refusal_s": 1.0}


@dataclass
class HostileReply:
    case: str
    seconds: float
    size: int
    refused: bool  # refused in one line (a hostile request must never be served)
    error: str | None


class HostileClient(threading.Thread):
    """tests/hostile_cases.py's requests, through the API and the page's events, in turn, until stopped."""

    def __init__(self, url: str):
        super().__init__(daemon=True, name="hostile client")
        self.url, self.stop, self.replies = url, threading.Event(), []

    def run(self) -> None:
        import hostile_cases as hc

        hc.HEADERS = forwarded(HOSTILE_ADDRESS)
        client = Client(self.url, verbose=False, headers=hc.HEADERS)
        try:
            calls = hc.requests(self.url, client, hc.events(self.url))
            while not self.stop.is_set():
                for case, call in calls:
                    if self.stop.is_set():
                        break
                    try:
                        r = call()
                        refused = r.error is not None and hc.one_line(r.error)
                        shown = None if r.error is None else hc.detail(r.error)[:200]
                        self.replies.append(HostileReply(case, r.seconds, r.size, refused, shown))
                    except Exception as e:  # noqa: BLE001 - a request the app could not answer at all
                        self.replies.append(HostileReply(case, 0.0, 0, False, f"{type(e).__name__}: {e}"[:200]))
                    time.sleep(HOSTILE_PAUSE_S)
        finally:
            client.close()


def hostile_phase(
    url: str,
    pair: str,
    prompts: list[str],
    max_new_tokens: int,
    users: int,
    minutes: float,
    seed: int,
    without: list[Outcome],
    measure,
    log,
    started=lambda: None,
    settle_s: float = SETTLE_S,
) -> dict:
    """The same crowd again, beside one hostile client; compared with the crowd alone (`without`).
    The memory it starts from is the app's after the crowd alone (the warm-up)."""
    time.sleep(settle_s)
    before = measure()
    started()
    log(f"the same {users} users for {minutes:g} min beside one hostile client")
    hostile = HostileClient(url)
    hostile.start()
    outcomes, stuck = crowd(url, pair, prompts, max_new_tokens, users, minutes, seed)
    hostile.stop.set()
    hostile.join(timeout=ANSWER_TIMEOUT_S)
    time.sleep(settle_s)
    after = measure()
    p95_without = percentile([o.wait_s for o in without if o.wait_s is not None], 0.95)
    p95_with = percentile([o.wait_s for o in outcomes if o.wait_s is not None], 0.95)
    replies = hostile.replies
    times = [r.seconds for r in replies if r.refused]
    report = {
        "honest_requests": len(outcomes),
        "honest_failures": sum(o.kind == "failed" for o in outcomes) + stuck,
        "honest_failure_details": sorted({o.detail for o in outcomes if o.kind == "failed"})[:10],
        "queue_wait_p95_without_s": _round(p95_without),
        "queue_wait_p95_with_s": _round(p95_with),
        "p95_ratio": _round(p95_with / p95_without) if p95_with and p95_without else None,
        "rss_start_mb": round(before.rss_mb, 1),
        "rss_end_mb": round(after.rss_mb, 1),
        "rss_change_pct": round(100 * (after.rss_mb - before.rss_mb) / before.rss_mb, 2),
        "hostile_requests": len(replies),
        "hostile_refused": len(times),
        "hostile_not_refused": sorted({f"{r.case}: {r.error}" for r in replies if not r.refused})[:10],
        "refusal_p95_s": _round(percentile(times, 0.95)),
        "refusal_max_s": _round(max(times) if times else None),
        "refusal_slowest": [f"{r.case}: {r.seconds:.2f} s" for r in sorted(replies, key=lambda r: -r.seconds)[:3]],
        "outcomes": outcomes,
        "stuck": stuck,
    }
    report["goals"] = {
        "honest_failures_0": report["honest_failures"] == 0,
        "p95_within_20pct": p95_with is not None
        and p95_without is not None
        and p95_with <= (1 + GOALS["p95_within"]) * p95_without,
        "rss_within_5pct": abs(after.rss_mb - before.rss_mb) <= GOALS["rss_within"] * before.rss_mb,
        "every_hostile_request_refused": bool(replies) and len(times) == len(replies),
        "refusals_within_1s": bool(times) and max(times) <= GOALS["refusal_s"],
    }
    return report


def hostile_summary(h: dict) -> list[str]:
    lines = [
        f"  beside one hostile client: {h['honest_requests']} honest requests, {h['honest_failures']} failures; "
        f"queue wait p95 {h['queue_wait_p95_with_s']} s against {h['queue_wait_p95_without_s']} s without it "
        f"(x{h['p95_ratio']}); RSS {h['rss_start_mb']} -> {h['rss_end_mb']} MB ({h['rss_change_pct']:+.2f} %; "
        f"the crowd alone: {h.get('rss_change_without_pct', float('nan')):+.2f} %)",
        f"  hostile requests {h['hostile_requests']}: refused in one line {h['hostile_refused']}, "
        f"p95 {h['refusal_p95_s']} s, max {h['refusal_max_s']} s",
    ]
    lines += [f"  slowest hostile request: {d}" for d in h["refusal_slowest"]]
    lines += [f"  hostile request not refused: {d}" for d in h["hostile_not_refused"]]
    lines += [f"  honest failure: {d}" for d in h["honest_failure_details"]]
    lines += [f"  goal {name}: {'met' if ok else 'NOT MET'}" for name, ok in h["goals"].items()]
    return lines


def run_once_with_timeout(client: Client, req: dict) -> Outcome:
    """The first run, which also waits for the pair's load."""
    job = client.submit(api_name="/generate", **req)
    if not answered(job, time.monotonic() + FIRST_RUN_TIMEOUT_S):
        job.cancel()
        return Outcome("failed", detail=f"no first run within {FIRST_RUN_TIMEOUT_S} s")
    try:
        job.result()
        trace = json.loads(job.outputs()[-1])
    except Exception as e:  # noqa: BLE001
        return error_outcome(e)
    return Outcome("completed", key=greedy_key(req), tokens=trace["token_ids"])


def write_curve(report: dict, prefix: Path) -> None:
    """The memory curve as PREFIX.json (the samples, the phases, the figures beside them) and
    PREFIX.svg; the band is drawn around the memory after warm-up (the hostile phase's start)."""
    from soak_plot import memory_svg

    h = report.get("hostile") or {}
    warm = h.get("rss_start_mb")
    keys = ("pair", "dtype", "public", "users", "minutes", "alone_minutes", "max_new_tokens", "started_at", "ended_at")
    curve = {
        **{k: report[k] for k in keys},
        "sample_every_s": SAMPLE_EVERY_S,
        "rss_after_warmup_mb": warm,
        "rss_end_mb": h.get("rss_end_mb", report["rss_end_mb"]),
        "rss_change_pct": h.get("rss_change_pct"),
        "phases": report["phases"],
        "rss_curve": report["rss_curve"],
    }
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".json").write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
    title = f"App resident memory: {report['users']} users, {report['pair'].rsplit('/', 1)[-1]}"
    svg = memory_svg([tuple(p) for p in report["rss_curve"]], [tuple(p) for p in report["phases"]], warm, title=title)
    prefix.with_suffix(".svg").write_text(svg, encoding="utf-8")


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def summary(r: dict) -> str:
    lines = [
        f"soak: {r['pair']} ({r['dtype']}), {'a public page, ' if r.get('public') else ''}{r['users']} users, "
        f"{r['minutes']:g} min, {r['started_at']} to {r['ended_at']}",
        f"  requests {r['requests']}: completed {r['completed']}, cancelled {r['cancelled']}, abandoned {r['abandoned']}, "
        f"refused {r['refused']}, failures {r['failures']}",
        f"  queue wait p50 {r['queue_wait_p50_s']} s, p95 {r['queue_wait_p95_s']} s, max {r['queue_wait_max_s']} s; "
        f"single run {r['single_run_s']} s alone (7: {r['seven_runs_s']} s), {r['run_under_load_s']} s at the server "
        f"during the soak (7: {r['seven_runs_under_load_s']} s; 7 of its runs in a row: p50 {r['seven_in_a_row_p50_s']} s, "
        f"p95 {r['seven_in_a_row_p95_s']} s); runs started while a request waited: p95 "
        f"{r['runs_ahead_p95']}, max {r['runs_ahead_max']}",
        f"  RSS {r['rss_start_mb']} MB after the first run, {r['rss_end_mb']} MB at the end, {r['rss_max_mb']} MB at most",
        f"  threads {r['threads_start']} -> {r['threads_end']}, open files {r['open_files_start']} -> {r['open_files_end']}, "
        f"temporary folders {r['temp_dirs_start']} -> {r['temp_dirs_end']}",
        f"  greedy identical: {r['greedy_identical']} ({r['greedy_runs']} greedy runs of {r['greedy_keys']} requests)",
    ]
    lines += [f"  failure: {d}" for d in r["failure_details"]]
    lines += [f"  check {name}: {'ok' if ok else 'NOT MET'}" for name, ok in r["checks"].items()]
    if "hostile" in r:
        lines += hostile_summary(r["hostile"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--pair", default=DEFAULT_PAIR, help="a preset, or 'DRAFT -> TARGET' of Hub ids, folders or .gguf files"
    )
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument(
        "--dtype", default="float32", help="the target's precision (SPECVIZ_DTYPE); greedy identity holds in float32"
    )
    ap.add_argument("--seed", type=int, default=0, help="seeds every user's choices")
    ap.add_argument(
        "--json", action="store_true", help="print the report as one JSON object (the summary goes to stderr)"
    )
    ap.add_argument(
        "--hostile",
        action="store_true",
        help="run the crowd twice, the second time beside one hostile client (tests/hostile_cases.py)",
    )
    ap.add_argument(
        "--alone-minutes",
        type=float,
        default=None,
        help="with --hostile: minutes of the crowd alone first, the warm-up (default: --minutes)",
    )
    ap.add_argument(
        "--public",
        action="store_true",
        help="a public page behind one trusted proxy, each client a visitor of its own (see above)",
    )
    ap.add_argument(
        "--settle-s",
        type=float,
        default=SETTLE_S,
        help="idle seconds before each count of memory, threads and files (default %(default)s)",
    )
    ap.add_argument(
        "--curve", type=Path, default=None, help="write the memory curve to CURVE.json and plot it in CURVE.svg"
    )
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.users < 1 or args.max_new_tokens < 1:
        ap.error("--minutes must be above 0, --users and --max-new-tokens at least 1")
    if args.settle_s < 0:
        ap.error("--settle-s must be 0 or more")
    if args.alone_minutes is not None and args.alone_minutes <= 0:
        ap.error("--alone-minutes must be above 0")
    err = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    report = soak(
        args.pair,
        args.minutes,
        args.users,
        args.max_new_tokens,
        args.dtype,
        args.seed,
        log=err,
        hostile=args.hostile,
        alone_minutes=args.alone_minutes,
        settle_s=args.settle_s,
        public=args.public,
    )
    if args.curve is not None:
        write_curve(report, args.curve)
    if args.json:
        print(json.dumps(report))
        err(summary(report))
    else:
        print(summary(report))
    return 0 if report["failures"] == 0 and report["greedy_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
