"""`python -m specviz bench`: specviz against transformers' `generate` on one model pair.

    python -m specviz bench --pair qwen-coder --max-new-tokens 128 --out bench-out

Writes bench.json, bench.md and bench.png to --out and prints the table; each specviz run's
trace goes to --out/traces, for the page's Traces tab. The outputs are rewritten after every
prompt. A full run on the bundled pair takes hours on two CPU cores: --methods, --limit and
--prompt-ids run subsets, and --resume continues a run that stopped part way.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import torch

from specviz.workshop.bench import report, resume
from specviz.workshop.bench.harness import BenchOptions, Raw, count_runs, eos_ids, run_bench
from specviz.workshop.bench.methods import FAMILY_NAMES, Method, check_pair, default_methods, parse_method
from specviz.errors import UserError
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, KINDS, BenchPrompt, load_prompts, select
from specviz.workshop.bench.summary import summarise
from specviz.choices import LLAMACPP
from specviz.workshop.cli import check_range, parse_list
from specviz.workshop.generate_cli import add_loading, add_pair, add_runtime, add_setting, loading
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.settings import MAX_K

DEFAULT_KS = "2,4"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pair(parser, DEFAULT_PAIR)
    parser.add_argument(
        "--prompts", default=str(DEFAULT_PROMPTS), help="prompt file, .json or .jsonl (default: the bundled set)"
    )
    add_setting(parser, "max_new_tokens", BenchOptions.max_new_tokens)
    parser.add_argument(
        "--k", default=DEFAULT_KS, help=f"fixed draft lengths to compare, comma-separated (default: {DEFAULT_KS})"
    )
    parser.add_argument(
        "--k-max",
        type=int,
        default=BenchOptions.k_max,
        help="upper bound of adaptive k (default: %(default)s, as the page's)",
    )
    add_setting(parser, "temperature", BenchOptions.temperature)
    parser.add_argument(
        "--repeats", type=int, default=BenchOptions.repeats, help="timed runs per method and prompt; the median counts"
    )
    parser.add_argument(
        "--methods",
        help="comma-separated subset of: "
        + ", ".join(dict.fromkeys(default_methods([4]) + default_methods([4], cross_tokenizer=True))).replace(
            "k4", "k<K>"
        )
        + " (default: all of the first set; for a draft with its own tokenizer, hf-plain, hf-universal*, sv-plain, sv-k<K>, sv-text and sv-intersection)",
    )
    parser.add_argument("--limit", type=int, help="run only the first N prompts (alternating code and prose)")
    parser.add_argument("--prompt-ids", help="comma-separated prompt ids to run")
    parser.add_argument("--kinds", help=f"comma-separated kinds of prompt to run ({', '.join(KINDS)}; default: all)")
    add_loading(parser, ", for both libraries")
    add_runtime(
        parser, "; on llama.cpp the default methods are lc-plain, lc-lookup (llama-cpp-python's own) and specviz's"
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice, one per core)")
    add_setting(parser, "seed", BenchOptions.seed)
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up run of each method")
    parser.add_argument("--out", default="bench-out", help="folder for bench.json, bench.md, bench.png and traces/")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose bench.json is in --out: keep the prompts it finished and run the rest; "
        "refused unless the pair, machine, libraries, specviz code, settings, methods, prompts and "
        "measured pass costs are the same",
    )


def _without_missing_tools(methods: list[Method]) -> list[Method]:
    """The methods less llama.cpp's own tools' where they are not built, saying so."""
    from specviz.workshop.bench import llamacpp_tools

    why = llamacpp_tools.missing() if any(m.family == "ll" for m in methods) else None
    if why:
        print(f"skipping {', '.join(m.name for m in methods if m.family == 'll')}: {why}", file=sys.stderr)
        return [m for m in methods if m.family != "ll"]
    return methods


def _prompts(args: argparse.Namespace) -> list[BenchPrompt]:
    """The prompts --prompts, --kinds, --prompt-ids and --limit name."""
    kinds = parse_list("--kinds", args.kinds) if args.kinds else KINDS
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UserError(f"unknown prompt kind(s): {', '.join(unknown)} (known: {', '.join(KINDS)})")
    return select(
        [p for p in load_prompts(args.prompts) if p.kind in kinds],
        ids=parse_list("--prompt-ids", args.prompt_ids) if args.prompt_ids else None,
        limit=args.limit,
    )


def run(args: argparse.Namespace) -> int:
    ks = _ks(args.k)
    names = parse_list("--methods", args.methods) if args.methods else default_methods(ks)
    methods = [parse_method(n) for n in dict.fromkeys(names)]  # parsed before loading: a typo fails fast
    methods = _without_missing_tools(methods)
    _check(args)
    prompts = _prompts(args)
    opts = BenchOptions(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        repeats=args.repeats,
        k_max=args.k_max,
        seed=args.seed,
        warmup=not args.no_warmup,
    )

    from specviz.engine.load import load

    if args.threads:
        torch.set_num_threads(args.threads)

    print(f"loading {args.pair} ...", file=sys.stderr)
    t0 = time.perf_counter()
    pair = load(
        args.pair,
        with_draft=any(m.needs_draft for m in methods) or not args.methods,
        **loading(args),
        runtime=args.runtime,
    )
    load_s = time.perf_counter() - t0
    if not args.methods and pair.runtime == LLAMACPP:
        methods = [parse_method(n) for n in default_methods(ks, runtime=pair.runtime)]
    if not args.methods and pair.cross_tokenizer:
        methods = [parse_method(n) for n in default_methods(ks, cross_tokenizer=True)]
    command = (
        "python -m specviz bench " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if sys.argv[1:2] == ["bench"]
        else "python -m specviz bench"
    )
    out = Path(args.out)
    earlier = resume.read_earlier(out) if args.resume else None

    def save(result: dict[str, Any], raw: Raw) -> None:
        # after every prompt, so a run cut short keeps what it measured; raw keeps the order
        # prompts finished in, so its last one is the prompt just done
        report.write_all(result, out)
        latest = next(reversed(raw))
        report.write_traces({latest: raw[latest]}, out)

    result = bench(
        pair, prompts, methods, opts, command=command, load_s=load_s, progress_bar=True, partial=save, earlier=earlier
    )
    paths = report.write_all(result, out)
    print(report.markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return 0


def bench(
    pair,
    prompts: list[BenchPrompt],
    methods: list[Method],
    opts: BenchOptions,
    *,
    command: str,
    load_s: float,
    progress_bar: bool = False,
    partial: Callable[[dict[str, Any], Raw], None] | None = None,
    earlier: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the bench on a loaded pair and return everything bench.json holds. `partial`, if
    given, gets the same over the prompts finished so far after each prompt, with their
    samples. `earlier` is the bench.json of a run to continue: its finished prompts are kept."""
    import transformers

    transformers.utils.logging.set_verbosity_error()  # per-call deprecation chatter
    check_pair(pair, methods)
    if earlier is not None:
        resume.adopt_costs(pair, earlier)
    meta, cost = _meta(pair, opts, command, load_s)
    stop = set(eos_ids(pair))
    kept, earlier_s, processes = _resumed(earlier, meta, methods, prompts)

    def result(raw, bench_s: float) -> dict[str, Any]:
        done = [p for p in prompts if p.id in raw]
        return {
            # bench_s: timed runs of every process that worked on it; processes: how many
            "meta": {
                **meta,
                "bench_s": earlier_s + bench_s,
                "processes": processes,
                "prompts_done": f"{len(done)} of {len(prompts)}",
            },
            "methods": [_method_record(m) for m in methods],
            "prompts": [{"id": p.id, "kind": p.kind, "chars": p.chars} for p in done],
            "samples": {p.id: {n: [s.record() for s in runs] for n, runs in raw[p.id].items()} for p in done},
            "summary": summarise(raw, done, methods, opts, stop=stop, cost=cost),
        }

    bar = _progress(count_runs([p for p in prompts if p.id not in kept], methods, opts)) if progress_bar else None
    t0 = time.perf_counter()
    try:
        raw = run_bench(
            pair,
            prompts,
            methods,
            opts,
            progress=bar.step if bar else None,
            prompt_done=(lambda raw: partial(result(raw, time.perf_counter() - t0), raw)) if partial else None,
            done=kept,
        )
    finally:
        if bar:
            bar.close()
    return result(raw, time.perf_counter() - t0)


def _resumed(
    earlier: dict[str, Any] | None, meta: dict[str, Any], methods: list[Method], prompts: list[BenchPrompt]
) -> tuple[Raw, float, int]:
    """From the bench.json of a run to continue (or None): its finished prompts that still
    fit this run, the timed seconds they took, and how many processes this one makes."""
    if earlier is None:
        return {}, 0.0, 1
    kept: Raw = resume.finished(earlier, meta, methods, prompts)
    print(f"resuming: {len(kept)} of {len(prompts)} prompts already done", file=sys.stderr)
    if not kept:
        return kept, 0.0, 1
    return kept, earlier["meta"].get("bench_s", 0.0), earlier["meta"].get("processes", 1) + 1


def _method_record(m: Method) -> dict[str, Any]:
    """What bench.json says of one method."""
    events = m.record if m.family == "sv" else None
    return {"name": m.name, "library": FAMILY_NAMES[m.family], "kind": m.kind, "k": m.k, "events": events}


def _meta(pair, opts: BenchOptions, command: str, load_s: float) -> tuple[dict[str, Any], Any]:
    """What bench.json says of the run before any method runs (the pair's cost model, read
    or measured here, with it), and that cost model."""
    import transformers

    from specviz.costs import measure

    t0 = time.perf_counter()
    cost = measure.for_pair(pair)
    meta = {
        "command": command,
        "machine": machine(pair.device),
        "pair": pair.name,
        "device": str(pair.device),
        "dtype": pair.precision,
        "runtime": pair.runtime,
        "draft_precision": pair.draft_precision,
        "load_s": load_s or pair.load_s,
        "cost_model_s": time.perf_counter() - t0,
        "cost_model": cost.to_dict() if cost else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "code": resume.code_digest(),
        **{k: v for k, v in asdict(opts).items() if k != "warmup"},  # the settings every method ran with
    }
    if pair.cross_tokenizer:
        meta["vocab"] = vocab_summary(pair)
    meta["draft_head"] = head_summary(pair)
    return meta, cost


def head_summary(pair) -> dict[str, Any] | None:
    """The trained draft head for the pair's target, if there is one: what it was trained on
    and its held-out acceptance (the head drafter's runs are compared with it)."""
    from specviz.drafters.head import head_for, head_path, target_label

    if not head_path(target_label(pair)).is_file():
        return None
    return asdict(head_for(pair)[1])


def vocab_summary(pair) -> dict[str, Any]:
    """For a draft with its own tokenizer: how much of the target's vocabulary it shares, and
    the method `auto` picks."""
    from specviz.models.alignment.vocab import head_rows
    from specviz.models.alignment.vocab_map import vocab_map

    m = pair.vocab_map or vocab_map(
        pair.draft_tokenizer, pair.tokenizer, draft_rows=head_rows(pair.draft), target_rows=pair.vocab_size
    )
    return {
        "overlap": m.overlap,
        "shared": m.shared,
        "target_entries": m.target_entries,
        "draft_entries": m.draft_entries,
        "default_method": m.method,
    }


def machine(device) -> str:
    """One line: CPU (or GPU), cores and threads, memory."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    from specviz.lm.timing import cpu_name

    try:  # the machine's memory, as /proc/meminfo's MemTotal
        mem = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB RAM"
    except (OSError, ValueError):
        mem = ""
    return f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads{mem}, {platform.system()}"


class _progress:
    """A tqdm bar on stderr that names the run in progress."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)
        self.started = False

    def step(self, label: str) -> None:
        if self.started:
            self.bar.update(1)
        self.started = True
        self.bar.set_description(label)

    def close(self) -> None:
        if self.started:
            self.bar.update(1)
        self.bar.close()


def _ks(text: str) -> list[int]:
    ks = parse_list("--k", text, int)
    for k in ks:
        check_range("--k: each k", k, 1, MAX_K)
    return ks


def _check(args: argparse.Namespace) -> None:
    check_range("--repeats", args.repeats, 1)
    check_range("--threads", args.threads, 1)
    check_range("--limit", args.limit, 1)
    check_range("--k-max", args.k_max, 1, MAX_K)
