"""One Space dry run: `python app.py` as a Gradio Space starts it, measured from outside.

Run by scripts/space_check.sh with the clean virtual environment's python. Starts the app
with a fresh HOME (so a fresh cache), SPACE_ID set, on 0.0.0.0:7860 (or a free port if 7860
is taken), then measures: seconds until the page answers, seconds until the default pair is
ready (the `status` API), the peak resident memory of the app's process tree across loading
and one run (sampled from /proc), and one run of the `generate` API through gradio_client.
Prints the figures and writes them as JSON; exits 1 if a limit below is broken.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

PAGE_LIMIT_S = 60
READY_LIMIT_S = 20 * 60
MEMORY_LIMIT = 16 * 10**9  # CPU basic's 16 GB
# Goals when `auto` picks llama.cpp (reported, not failed: they depend on the machine).
LLAMACPP_READY_GOAL_S = 30
LLAMACPP_MEMORY_GOAL = 4 * 10**9
RUN_LIMIT_S = 10 * 60
PROMPT = "def fibonacci(n):"
SAMPLE_S = 0.2
REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="a fresh folder for HOME, the log and the result")
    ap.add_argument("--label", default="requirements.txt")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--zero-gpu", action="store_true", help="as on ZeroGPU: SPACES_ZERO_GPU set (see main's comments)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    home = args.work / "home"
    home.mkdir()

    port = args.port if port_free(args.port) else free_port()
    if port != args.port:
        print(f"port {args.port} is taken here: using {port}")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SPECVIZ_", "GRADIO_", "HF_", "XDG_")) and k != "CI"
    }
    env.update(
        HOME=str(home),
        SPACE_ID="specviz/space-check",
        GRADIO_SERVER_NAME="0.0.0.0",
        GRADIO_SERVER_PORT=str(port),
        PYTHONUNBUFFERED="1",
    )
    if args.zero_gpu:
        # The real spaces package in its ZeroGPU mode: CUDA emulated in this process, models placed
        # there at start. No ZeroGPU service runs here: its address is one nothing listens on. The
        # GPU default pair comes from the Hub, which is not reachable here: the bundled pair stands in.
        env.update(
            SPACES_ZERO_GPU="true", SPACES_ZERO_DEVICE_API_URL="http://127.0.0.1:9", SPECVIZ_DEFAULT_PAIR="qwen-coder"
        )
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):  # never fill this machine's own persistent storage
        env["SPECVIZ_CACHE"] = str(home / ".cache" / "specviz")

    result: dict = {
        "label": args.label,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "python": sys.version.split()[0],
        "port": port,
        "packages": versions(),
    }
    failures: list[str] = []
    log = open(args.work / "app.log", "wb")
    start = time.monotonic()
    app = subprocess.Popen(
        [sys.executable, "app.py"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    memory = MemorySampler(app.pid)
    memory.start()
    try:
        url = f"http://127.0.0.1:{port}"
        # On ZeroGPU the pair is on CUDA before the page launches (app.py), so the page answers once it has loaded.
        page_limit = READY_LIMIT_S if args.zero_gpu else PAGE_LIMIT_S
        page_s = wait_for_page(url, app, page_limit)
        if page_s is None and args.zero_gpu and app.poll() is not None:
            zero_gpu_start(args.work / "app.log", result, failures)
            return finish(result, failures, args.work, memory, app)
        if page_s is None:
            failures.append(f"the page did not answer within {page_limit} s")
            return finish(result, failures, args.work, memory, app)
        result["page_s"] = round(page_s, 1)
        print(f"page answered after {page_s:.1f} s", flush=True)

        from gradio_client import Client

        client = Client(url, verbose=False)
        memory.phase = "loading"
        status, ready_s = wait_until_ready(client, app, start, READY_LIMIT_S)
        result["status"] = status
        if status.get("state") != "ready":
            failures.append(f"the pair was not ready within {READY_LIMIT_S // 60} min: {status}")
            return finish(result, failures, args.work, memory, app)
        result["ready_s"] = round(ready_s, 1)
        result["ready_memory"] = memory.report()
        print(
            f"pair {status['pair']} ready after {ready_s:.1f} s on {status.get('runtime')} ({status.get('runtime_reason')}); "
            f"cache {status['cache']} ({status['cache_reason']}); background: {status.get('preparing') or 'none'}",
            flush=True,
        )

        memory.phase = "run"
        if args.zero_gpu:
            zero_gpu_run(client, app, url, result, failures)
            return finish(result, failures, args.work, memory, app)
        run_start = time.monotonic()
        job = client.submit(prompt=PROMPT, api_name="/generate")
        job.result(timeout=RUN_LIMIT_S)
        outputs = job.outputs()
        run_s = time.monotonic() - run_start
        trace = json.loads(outputs[-1]) if outputs else {}
        summary = trace.get("summary") or {}
        result["run"] = {
            "run_s": round(run_s, 1),
            "messages": len(outputs),
            "events": len(trace.get("events") or []),
            "new_tokens": summary.get("new_tokens"),
            "rounds": summary.get("rounds"),
            "acceptance_rate": summary.get("acceptance_rate"),
            "tokens_per_s": summary.get("tokens_per_s"),
            "wall_s": summary.get("wall_s"),
            "stop_reason": summary.get("stop_reason"),
            "settings": {
                k: trace.get("settings", {}).get(k) for k in ("drafter", "policy", "k", "max_new_tokens", "temperature")
            },
            "text": (trace.get("text") or "")[:200],
        }
        if not trace.get("events") or not summary.get("stop_reason"):
            failures.append("the run returned no finished trace")
        print(
            f"one run: {result['run']['new_tokens']} tokens in {run_s:.1f} s ({result['run']['stop_reason']})",
            flush=True,
        )
        return finish(result, failures, args.work, memory, app)
    except Exception as e:  # whatever went wrong is a failed check, with the app's log kept
        failures.append(f"{type(e).__name__}: {e}")
        return finish(result, failures, args.work, memory, app)


def zero_gpu_start(log_path: Path, result: dict, failures: list[str]) -> None:
    """The app ended at launch: as far as ZeroGPU runs without its service, if the pair was on
    CUDA before launch and what ended it was the spaces package reporting to the ZeroGPU service
    (its startup report), which no machine here can reach."""
    log = log_path.read_text(errors="replace")
    placed = re.search(r"ZeroGPU: (\S+) loaded on (\S+) \((\S+)\) before launch; grants by new tokens: (\{.*\})", log)
    if placed is None:
        failures.append("the app ended before the page answered, without the pair on CUDA")
        return
    result["zero_gpu"] = {
        "pair": placed.group(1),
        "device": placed.group(2),
        "runtime": placed.group(3),
        "grants_by_new_tokens": placed.group(4),
    }
    print(
        f"ZeroGPU: {placed.group(1)} on {placed.group(2)} ({placed.group(3)}) before launch; grants {placed.group(4)}"
    )
    if not placed.group(2).startswith("cuda") or placed.group(3) != "torch":
        failures.append(f"under ZeroGPU the pair went to {placed.group(2)} on {placed.group(3)}, not cuda on torch")
    if "startup_report" not in log:
        failures.append("the app ended at launch, and not at ZeroGPU's startup report")
        return
    result["zero_gpu"]["ended"] = "at spaces' startup report to the ZeroGPU service, which cannot be reached here"
    print(f"the app then ended as expected here: {result['zero_gpu']['ended']}")


def zero_gpu_run(client, app: subprocess.Popen, url: str, result: dict, failures: list[str]) -> None:
    """On ZeroGPU's emulation: the pair must be on CUDA with the torch runtime, the status must
    say what runs would ask for, and a run (which no GPU service here can grant) must end in
    ZeroGPU's refusal, with the page still serving after it."""
    status = result.get("status") or {}
    if status.get("runtime") != "torch":
        failures.append(f"the pair runs on {status.get('runtime')!r}, not torch, under ZeroGPU")
    if not (status.get("zero_gpu") or {}).get("grant_s"):
        failures.append("the status says no ZeroGPU grants")
    print(f"ZeroGPU grants a run would ask for, by new tokens: {(status.get('zero_gpu') or {}).get('grant_s')}")
    start = time.monotonic()
    try:
        client.predict(prompt=PROMPT, api_name="/generate")
        result["run"] = {"outcome": "a trace (a GPU service answered)"}
    except Exception as e:  # expected: ZeroGPU's client finds no service to ask for a GPU
        result["run"] = {"outcome": "refused", "error": str(e)[:300], "seconds": round(time.monotonic() - start, 1)}
    print(f"one run: {result['run']}", flush=True)
    if app.poll() is not None or wait_for_page(url, app, 10) is None:
        failures.append("the page stopped serving after the run")


def finish(result: dict, failures: list[str], work: Path, memory: "MemorySampler", app: subprocess.Popen) -> int:
    stop(app)
    memory.stop()
    result["memory"] = memory.report()
    if (result.get("status") or {}).get("runtime") == "llama.cpp" and "ready_s" in result:
        app_peak = result["memory"]["app_peak_bytes"]
        result["llamacpp_goals"] = {
            "ready_s": result["ready_s"],
            "ready_goal_s": LLAMACPP_READY_GOAL_S,
            "ready_met": result["ready_s"] <= LLAMACPP_READY_GOAL_S,
            "app_peak_gb": round(app_peak / 1e9, 2),
            "memory_goal_gb": LLAMACPP_MEMORY_GOAL / 1e9,
            "memory_met": app_peak <= LLAMACPP_MEMORY_GOAL,
            "note": "the app's own process; a background timing of torch (a child process) is in the tree's peak",
        }
    if result["memory"]["peak_bytes"] > MEMORY_LIMIT:
        failures.append(f"peak memory {result['memory']['peak_gb']} GB is over CPU basic's {MEMORY_LIMIT / 1e9:.0f} GB")
    result["failures"] = failures
    result["passed"] = not failures
    (work / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        print(f"the app's log: {work / 'app.log'}")
        print("".join((work / "app.log").read_text(errors="replace").splitlines(keepends=True)[-30:]))
    else:
        print(f"PASS ({result['label']})")
    return 1 if failures else 0


def wait_for_page(url: str, app: subprocess.Popen, limit_s: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < limit_s and app.poll() is None:
        try:
            with urllib.request.urlopen(url + "/", timeout=5) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.2)
    return None


def wait_until_ready(client, app: subprocess.Popen, start: float, limit_s: float) -> tuple[dict, float]:
    """The status once the pair is ready or failed (or the limit passed), and the seconds
    since the app was started."""
    status, said = {}, None
    while time.monotonic() - start < limit_s and app.poll() is None:
        status = json.loads(client.predict("", api_name="/status"))  # "": the page's pair
        if status["state"] in ("ready", "error"):
            break
        line = f"{status['state']}: {status['message']} ({status['fraction']:.0%})"
        if line != said:
            print(f"  [{time.monotonic() - start:5.0f} s] {line}", flush=True)
            said = line
        time.sleep(2)
    return status, time.monotonic() - start


class MemorySampler(threading.Thread):
    """Peak resident memory of a process and its descendants, read from /proc."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.phase = "starting"
        self.peak: dict[str, dict] = {}
        self._done = threading.Event()  # not _stop: threading.Thread has one

    def run(self) -> None:
        self.app_peak = 0
        while not self._done.is_set():
            total = {"rss": 0, "anon": 0, "file": 0}
            for pid in tree(self.pid):
                for key, value in rss(pid).items():
                    total[key] += value
            self.app_peak = max(self.app_peak, rss(self.pid).get("rss", 0))
            best = self.peak.setdefault(self.phase, {"rss": 0, "anon": 0, "file": 0})
            for key, value in total.items():
                best[key] = max(best[key], value)
            self._done.wait(SAMPLE_S)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)

    def report(self) -> dict:
        peak = max((p["rss"] for p in self.peak.values()), default=0)
        by_phase = {phase: {k: round(v / 1e9, 2) for k, v in p.items()} for phase, p in self.peak.items()}
        app_peak = getattr(self, "app_peak", 0)
        return {
            "peak_bytes": peak,
            "peak_gb": round(peak / 1e9, 2),
            "by_phase_gb": by_phase,
            "app_peak_bytes": app_peak,
            "app_peak_gb": round(app_peak / 1e9, 2),
            "note": "RSS of the app's process tree (rss = anon + file-backed pages such as memory-mapped weights); "
            "app_peak: the app's own process",
        }


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rss(pid: int) -> dict[str, int]:
    fields = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file"}
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            parts = line.split()
            if parts and parts[0] in fields:
                out[fields[parts[0]]] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def stop(app: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if app.poll() is not None:
            return
        try:
            os.killpg(app.pid, sig)
        except ProcessLookupError:
            return
        try:
            app.wait(wait)
        except subprocess.TimeoutExpired:
            pass


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: closed connections don't count
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def machine() -> str:
    cpu, flags = platform.processor() or platform.machine(), ""
    try:
        info = Path("/proc/cpuinfo").read_text()
        cpu = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
        flags = " avx512_bf16" if "avx512_bf16" in info else ""
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}{flags}, {os.cpu_count()} cores, {mem:.0f} GiB"


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "gradio", "spaces"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


if __name__ == "__main__":
    sys.exit(main())
