"""A hostile visitor's probe of a launched public page: declared types, uploads held in memory,
and server details (docs/PUBLIC.md, "Declared types, uploads, server details").

    SPECVIZ_PUBLIC=1 SPECVIZ_PRELOAD=0 SPECVIZ_MAX_REFUSED_PER_MINUTE=0 python3.11 app.py &
    python3.11 scripts/probe_types.py http://127.0.0.1:7860/ --pid $!

Each case is sent at crash size the way a visitor would (gradio_client, fn_index over raw HTTP,
raw /call, MCP, upload) and prints one JSON line: seconds, bytes of the answer, the refusal,
the app's resident memory before and after, and whether an honest call is still answered.
Then the largest legal traces are uploaded --uploads times each, from a session of their own,
with the app's memory before and after; then the page's texts are searched for server details.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import hostile_cases as hc  # noqa: E402 (the suite's cases, sent the same way)


def rss_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


HONEST: list = []  # the honest call, set in main


def probe(pid: int, case: str, door: str, send) -> dict:
    before = rss_mb(pid)
    r = send()
    out = {"case": case, "door": door, "seconds": round(r.seconds, 3), "bytes": r.size, "refusal": r.error}
    return out | {"rss_before_mb": before, "rss_after_mb": rss_mb(pid), "honest_call_served": HONEST[0]()}


def declared_cases(url: str, client, events: dict, pid: int) -> list[dict]:
    out = []
    for case, name, args, _ in hc.DECLARED:
        out.append(probe(pid, case, f"api /{name}", lambda n=name, a=args: hc.api_reply(client, n, **a)))
        values = [args.get(p, d) for p, d in hc.defaults(client, name)]
        out.append(probe(pid, case, f"fn_index {name}", lambda n=name, v=values: hc.page_event(url, events[n], v)))
    for case, name, body, _ in hc.RAW_DECLARED:
        out.append(probe(pid, case, f"http /call/{name}", lambda n=name, b=body: hc.raw_call(url, n, b)))
    return out


def upload_cases(url: str, events: dict, pid: int) -> list[dict]:
    return [
        probe(pid, case, "upload", lambda c=make(): hc.uploaded_trace(url, events, c)) for case, make, _ in hc.UPLOADS
    ]


SHAPES = {"largest-run": hc.largest_run, "most-objects": hc.most_objects}


def held_uploads(url: str, events: dict, pid: int, times: int, shape: str) -> list[dict]:
    """The largest legal trace of `shape` uploaded `times` times, each read in a session of its own."""
    out = []
    for name, data in ((shape, SHAPES[shape]()),):
        before, refused, seconds = rss_mb(pid), 0, []
        for _ in range(times):
            r = hc.uploaded_trace(url, events, data)
            refused += r.error is not None
            seconds.append(round(r.seconds, 2))
        out.append(
            {"case": f"the {name} trace ({len(data):,} bytes) uploaded {times} times", "refused": refused}
            | {"seconds": seconds, "rss_before_mb": before, "rss_after_mb": rss_mb(pid)}
        )
    return out


def details(url: str, client) -> dict:
    """Where a server detail could show, and what of this machine's shows there."""
    import torch
    import transformers

    from specviz.lm.timing import cpu_name

    texts = {
        "status": client.predict("", api_name="/status"),
        "page config (header)": httpx.get(f"{url}config", timeout=30).text,
        "llama.cpp export": client.predict(
            format="llamacpp", pair="qwen-coder", drafter="lookup", api_name="/export_settings"
        ),
        "error": hc.api_reply(client, "export_settings", format="vllm", pair="/etc/passwd -> /etc/hosts").error or "",
    }
    looked = {"absolute path": str(Path.home()), "site-packages": "site-packages", "CPU": cpu_name()}
    looked |= {"torch": torch.__version__, "transformers": transformers.__version__}
    return {where: [k for k, v in looked.items() if v and v in text] for where, text in texts.items()}


def main() -> None:
    from gradio_client import Client

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--pid", type=int, required=True, help="the app's process id, for its resident memory")
    ap.add_argument("--uploads", type=int, default=8)
    ap.add_argument("--shape", choices=SHAPES, default="largest-run", help="the legal trace uploaded --uploads times")
    ap.add_argument("--only-uploads", action="store_true", help="skip the other cases")
    args = ap.parse_args()
    client = Client(args.url, verbose=False)
    events = hc.events(args.url)
    HONEST.append(lambda: json.loads(client.predict(api_name="/speedup", **hc.GOOD_SPEEDUP))["speedup"] > 1)
    for part in () if args.only_uploads else (declared_cases, upload_cases):
        for row in part(args.url, *((client,) if part is declared_cases else ()), events, args.pid):
            print(json.dumps(row), flush=True)
    for row in held_uploads(args.url, events, args.pid, args.uploads, args.shape):
        print(json.dumps(row | {"honest_call_served": HONEST[0]()}), flush=True)
    print(json.dumps({"server details found": details(args.url, client), "honest_call_served": HONEST[0]()}))


if __name__ == "__main__":
    main()
