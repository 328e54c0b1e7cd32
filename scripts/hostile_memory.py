"""What the app's resident memory does under the hostile client's requests, with and without
handing freed heap memory back (app/memory_trim.py).

    python3.11 scripts/hostile_memory.py [--passes 3] [--wait-s 75] [--json]

For each of `SPECVIZ_MEMORY_TRIM=0` and the default: launches `python app.py` on the tiny
pair of tests/app_server.py (not public, as the soak runs it), runs one generation, then
sends every request of tests/hostile_cases.py `--passes` times one after another, and reads
the app's RSS after the first run, after each pass and `--wait-s` seconds later (past the
60 s after which idle sessions are forgotten, app/sessions.py). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from gradio_client import Client  # noqa: E402

import hostile_cases  # noqa: E402
from app_server import launched_app, save_tiny_pair  # noqa: E402
from probe_types import rss_mb  # noqa: E402
from soak import app_pid  # noqa: E402

SETTLE_S = 7.0


def one_app(pair: str, trim: bool, passes: int, wait_s: float, log) -> dict:
    env = {"SPECVIZ_DEFAULT_PAIR": pair, "SPECVIZ_MEMORY_TRIM": "1" if trim else "0"}
    with launched_app(env, f"hostile-memory-{'trim' if trim else 'no-trim'}") as url:
        pid = app_pid()
        client = Client(url, verbose=False)
        client.predict(prompt="def f(x):", max_new_tokens=8, api_name="/generate")
        time.sleep(SETTLE_S)
        base = rss_mb(pid)
        requests = hostile_cases.requests(url, client, hostile_cases.events(url))
        after = []
        for p in range(passes):
            for _, send in requests:
                try:
                    send()
                except Exception:  # a refusal the client raises: what is measured is the app's memory
                    pass
            time.sleep(SETTLE_S)
            after.append(rss_mb(pid))
            log(f"  trim {trim}: pass {p + 1} of {len(requests)} requests: {after[-1]} MB (from {base})")
        time.sleep(wait_s)
        waited = rss_mb(pid)
    return {
        "trim": trim,
        "requests_per_pass": len(requests),
        "rss_after_first_run_mb": base,
        "rss_after_each_pass_mb": after,
        "rss_after_wait_mb": waited,
        "growth_after_passes_pct": round(100 * (after[-1] / base - 1), 1),
        "growth_after_wait_pct": round(100 * (waited / base - 1), 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--wait-s", type=float, default=75.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    pair = save_tiny_pair(Path(tempfile.mkdtemp(prefix="hostile-memory-")))
    report = [one_app(pair, trim, args.passes, args.wait_s, log) for trim in (False, True)]
    if args.json:
        print(json.dumps(report))
    else:
        for r in report:
            print(
                f"trim {r['trim']}: {r['rss_after_first_run_mb']} MB after the first run; "
                f"+{r['growth_after_passes_pct']} % after {args.passes} passes of {r['requests_per_pass']} "
                f"hostile requests; +{r['growth_after_wait_pct']} % {args.wait_s:g} s later"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
