"""What a streamed run leaves in the app's memory: one long tree run called through MCP, and one
posted to /call/generate and not read, with the app's resident memory sampled throughout.

    python3.11 scripts/stream_memory.py --pair 'DRAFT -> TARGET' [--max-new-tokens 1024] [--json]

Launches `python app.py` on 127.0.0.1 with the pair, runs the request (greedy, the tree
drafter, words to the last token) once to warm up (and to learn the finished trace's size), then: (1) the same run as an MCP tool call; (2) the same run
through the raw API marked as Gradio's MCP client marks its calls, read as it streams, to
count what such a call is sent; (3) the same run posted to /call/generate and read only after
UNREAD_WAIT_S (or --read-after-s: any time after the run has ended reads the same messages),
counting the messages and bytes that waited for it. For each: the app's RSS before, at most
during, and after (psutil, every 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

import httpx  # noqa: E402
import psutil  # noqa: E402

from app_server import launched_app  # noqa: E402
from specviz.app.background import UNREAD_S  # noqa: E402
from soak import api_data, app_pid  # noqa: E402

PROMPT = "Write a Python function that reverses a string, then explain it line by line."
# Words to the end: a small pair's text would otherwise end itself long before the last token.
RUN = {"drafter": "tree", "output_format": "regex", "output_spec": "([a-z]+ ){1500}"}
UNREAD_WAIT_S = UNREAD_S + 5.0  # past the time the app gives an unread job before stopping its run
SETTLE_S = 2.0
TIMEOUT_S = 900


class Peak(threading.Thread):
    """The highest RSS of `pid` (MB) while running, sampled every 50 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.proc, self.stop, self.peak_mb = psutil.Process(pid), threading.Event(), 0.0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            self.peak_mb = max(self.peak_mb, rss_mb(self.proc))


def rss_mb(proc: psutil.Process) -> float:
    return proc.memory_info().rss / 2**20


def measured(pid: int, call) -> dict:
    """`call()`'s figures, with the app's RSS before, at most during and after it."""
    proc = psutil.Process(pid)
    time.sleep(SETTLE_S)
    before = rss_mb(proc)
    peak = Peak(pid)
    peak.start()
    try:
        figures = call()
    finally:
        peak.stop.set()
        peak.join()
    time.sleep(SETTLE_S)
    after = rss_mb(proc)
    return {
        **figures,
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(max(peak.peak_mb, before), 1),
        "rss_after_mb": round(after, 1),
        "rss_peak_growth_mb": round(max(peak.peak_mb, before) - before, 1),
    }


def sse_messages(body: str) -> list[tuple[str, str]]:
    """(event, data) of each message of a /call stream."""
    out, event = [], None
    for line in body.splitlines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event is not None:
            out.append((event, line[5:].strip()))
            event = None
    return out


def raw_call(url: str, data: list, *, headers: dict | None = None, read_after_s: float = 0.0) -> dict:
    """POST /call/generate, wait `read_after_s`, then read its whole stream."""
    with httpx.Client(base_url=url, timeout=TIMEOUT_S) as http:
        event_id = http.post("gradio_api/call/generate", json={"data": data}, headers=headers or {}).json()["event_id"]
        time.sleep(read_after_s)
        messages = sse_messages(http.get(f"gradio_api/call/generate/{event_id}").text)
    traces = [d for e, d in messages if e in ("generating", "complete") and "token_ids" in d]
    last = json.loads(traces[-1])[0] if traces else None
    return {
        "messages": len(messages),
        "trace_messages": len(traces),
        "bytes": sum(len(d) for _, d in messages),
        "last_bytes": len(traces[-1]) if traces else 0,
        "events": [e for e, _ in messages],
        "last_stop_reason": json.loads(last)["summary"]["stop_reason"] if last else None,
        "last_new_tokens": json.loads(last)["summary"]["new_tokens"] if last else None,
    }


def mcp_call(url: str, pair: str, max_new_tokens: int) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    args = {"prompt": PROMPT, "pair": pair, **RUN, "max_new_tokens": max_new_tokens}

    async def talk() -> dict:
        async with streamable_http_client(f"{url}gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                reply = await session.call_tool("generate", args)
        text = reply.content[0].text if reply.content else ""
        summary = json.loads(text)["summary"] if not reply.isError else {}
        return {
            "error": text[:200] if reply.isError else None,
            "result_bytes": len(text),
            "stop_reason": summary.get("stop_reason"),
            "new_tokens": summary.get("new_tokens"),
        }

    return asyncio.run(talk())


def measure(pair: str, max_new_tokens: int, log=print, read_after_s: float = UNREAD_WAIT_S) -> dict:
    with launched_app({"SPECVIZ_DEFAULT_PAIR": pair, "SPECVIZ_PRELOAD": "1"}, "stream-memory") as url:
        pid = app_pid()
        data = api_data(url, {"prompt": PROMPT, "pair": pair, **RUN, "max_new_tokens": max_new_tokens})
        log(f"app on {url} (pid {pid}): warming up with one {max_new_tokens}-token tree run")
        warm = raw_call(url, data)
        report = {"pair": pair, "max_new_tokens": max_new_tokens, "warm_run": warm}
        log("an MCP tool call")
        report["mcp"] = measured(pid, lambda: mcp_call(url, pair, max_new_tokens))
        log("the raw API marked as Gradio's MCP client marks its calls, read as it streams")
        report["mcp_marked_raw"] = measured(pid, lambda: raw_call(url, data, headers={"x-gradio-user": "mcp"}))
        log(f"a /call job read only after {read_after_s:g} s")
        report["unread_call"] = measured(pid, lambda: raw_call(url, data, read_after_s=read_after_s))
        report["unread_call"]["read_after_s"] = read_after_s
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", required=True, help="a preset, or 'DRAFT -> TARGET' of folders")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--json", action="store_true", help="print the report as one JSON object")
    ap.add_argument(
        "--read-after-s",
        type=float,
        default=UNREAD_WAIT_S,
        help=f"when the unread job is read (default {UNREAD_WAIT_S:g}: after the app has given up on its reader)",
    )
    args = ap.parse_args(argv)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    report = measure(args.pair, args.max_new_tokens, log=log, read_after_s=args.read_after_s)
    print(json.dumps(report) if args.json else json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
