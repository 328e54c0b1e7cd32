"""llguidance against xgrammar on a pair's own tokenizer: what choosing the grammar engine rested on.

For each engine: the time to read the tokenizer once, the time to compile each output format
of the bench's `json` group (and a regex, a choice and a grammar), and the time of one token
mask along a valid answer, token by token (the answer is the canonical JSON of a value the
schema accepts, tokenized by the pair's tokenizer), with how many tokens each engine forces
at each step. One core, as specviz uses it.

    flock /work/locks/heavy.lock python3.11 scripts/grammar_engines.py [--pair qwen-coder] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.choices import CHOICE, GRAMMAR, JSON_SCHEMA, REGEX  # noqa: E402

# Values each schema of the json group accepts: the answers the masks are timed along.
ANSWERS = {
    "json-contact": {
        "full_name": "Dr. Margaret O'Donnell-Vasquez",
        "title": "Senior Director of Clinical Research Operations",
        "organization": "Northwind Biomedical Laboratories, Inc.",
        "address": {
            "street": "1400 Harborview Parkway",
            "suite": "Suite 620",
            "city": "Seattle",
            "state": "WA",
            "postal_code": "98101",
            "country": "USA",
        },
        "office_phone": "+1 (206) 555-0143",
        "mobile_phone": "+1 (206) 555-0198",
        "email": "margaret.odonnell-vasquez@northwind-biomed.example.com",
        "website": "https://www.northwind-biomed.example.com/research",
    },
    "json-csv": {
        "rows": [
            {"city": "Tokyo", "country": "Japan", "population": 13960000, "area_km2": 2194},
            {"city": "Delhi", "country": "India", "population": 16787941, "area_km2": 1484},
            {"city": "Shanghai", "country": "China", "population": 24870895, "area_km2": 6341},
        ]
    },
}
OTHERS = {
    "regex": (REGEX, r"(\+1 )?\([0-9]{3}\) [0-9]{3}-[0-9]{4}", "+1 (206) 555-0143"),
    "choice": (CHOICE, '["positive", "negative", "neutral"]', "neutral"),
    "grammar": (
        GRAMMAR,
        'start: "SELECT " cols " FROM " NAME (" WHERE " NAME " = " NUMBER)?\ncols: NAME (", " NAME)*\n'
        "NAME: /[a-z_]+/\nNUMBER: /[0-9]+/",
        "SELECT name, email FROM users WHERE id = 42",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from specviz.choices import LLAMACPP
    from specviz.grammar import formats
    from specviz.lm.loader import load_pair
    from specviz.lm.prompt import stop_ids
    from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts

    pair = load_pair(args.pair, runtime=LLAMACPP, with_draft=False)  # the tokenizer is what is measured
    tok, vocab = pair.tokenizer, pair.vocab_size
    cases = {}
    for p in load_prompts(DEFAULT_PROMPTS):
        if p.output is not None:
            answer = ANSWERS.get(p.id)
            text = formats.canonical_json(answer) if answer is not None else None
            cases[p.id] = (p.output_format, p.output_spec, text)
    cases.update(OTHERS)
    out = {"pair": args.pair, "vocab": vocab, "engines": {}}
    for name, engine in (("llguidance", Llguidance), ("xgrammar", Xgrammar)):
        start = time.perf_counter()
        e = engine(tok, vocab, sorted(stop_ids(pair)))
        row = {"tokenizer_s": time.perf_counter() - start, "compile_ms": {}, "mask_us": {}, "forced": {}}
        for case, (fmt, spec, text) in cases.items():
            grammar = formats.parse(fmt, spec)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                m = e.compile(grammar)
                times.append((time.perf_counter() - t0) * 1000)
            row["compile_ms"][case] = statistics.median(times)
            if text is not None:
                ids = tok.encode(text, add_special_tokens=False)
                masks, forced = e.walk(m, ids)
                row["mask_us"][case] = _spread(masks)
                row["forced"][case] = forced
        out["engines"][name] = row
        print(json.dumps({name: row}, indent=1), flush=True)
    print(json.dumps(out))


def _spread(us: list[float]) -> dict:
    a = np.array(us)
    return {"n": len(us), "mean": float(a.mean()), "p50": float(np.median(a)), "p99": float(np.percentile(a, 99))}


class Llguidance:
    def __init__(self, tok, vocab: int, stops: list[int]):
        import llguidance
        import llguidance.hf

        self.ll = llguidance
        self.tok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab, eos_token=stops)
        self.buf = np.zeros((vocab + 31) // 32, dtype=np.int32)

    def compile(self, grammar):
        m = self.ll.LLMatcher(self.tok, grammar.engine_text)
        if m.is_error():
            raise SystemExit(m.get_error())
        return m

    def walk(self, m, ids: list[int]) -> tuple[list[float], int]:
        us, forced = [], 0
        for t in ids:
            t0 = time.perf_counter()
            m.unsafe_compute_mask_ptr(self.buf.ctypes.data, self.buf.nbytes)
            us.append((time.perf_counter() - t0) * 1e6)
            forced += len(m.compute_ff_tokens()) > 0
            if not m.consume_token(t):
                raise SystemExit(f"llguidance refused token {t}: {m.get_error()}")
        return us, forced


class Xgrammar:
    def __init__(self, tok, vocab: int, stops: list[int]):
        import xgrammar

        self.xg = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tok, vocab_size=vocab, stop_token_ids=stops)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.mask = xgrammar.allocate_token_bitmask(1, vocab)

    def compile(self, grammar):
        kind, text = grammar.kind, grammar.source
        if kind == JSON_SCHEMA:  # written as specviz writes JSON (formats.JSON_STYLE)
            compiled = self.compiler.compile_json_schema(text, any_whitespace=False, separators=(", ", ": "))
        elif kind == REGEX:
            compiled = self.compiler.compile_regex(text)
        elif kind == CHOICE:
            compiled = self.compiler.compile_regex("|".join(re.escape(c) for c in grammar.choices))
        else:
            compiled = self.compiler.compile_lark(text)
        return self.xg.GrammarMatcher(compiled)

    def walk(self, m, ids: list[int]) -> tuple[list[float], int]:
        us, forced = [], 0
        for t in ids:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(self.mask)
            us.append((time.perf_counter() - t0) * 1e6)
            forced += bool(m.find_jump_forward_string())
            if not m.accept_token(t):
                raise SystemExit(f"xgrammar refused token {t}")
        return us, forced


if __name__ == "__main__":
    main()
