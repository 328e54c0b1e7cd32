"""llama-cpp-python's own decoding as the bench's reference for the llama.cpp runtime: its
`Llama.generate` over the same GGUF file, threads and prompt ids, plain or with
`LlamaPromptLookupDecoding` (the only drafter it ships).

Greedy is top_k=1 (its sampler then takes the argmax); sampling is temperature with
top-k/top-p off, as specviz samples. Its `Llama` has no switch for llama.cpp's extra buffer
types, so the model is loaded with the ones specviz's runtime uses (lm/llamacpp_runtime/library.py:
off where a native build with AMX would crash).
"""

from __future__ import annotations

import contextlib
import json
import time

from specviz.choices import FREE_TEXT, JSON_SCHEMA
from specviz.errors import UserError
from specviz.grammar.formats import ANY_OBJECT
from specviz.lm.llamacpp_runtime.library import extra_buffer_types, llama
from specviz.lm.llamacpp_runtime.model import DEFAULT_CONTEXT
from specviz.workshop.bench.hf_baselines import PROMPT_LOOKUP_TOKENS  # drafts as long as transformers'

_models: dict[tuple, object] = {}
_grammars: dict[tuple, object] = {}


def model(path, threads: int, *, lookup: bool = False):
    """A `llama_cpp.Llama` on `path`, made once per (file, threads, drafter), with the runtime's context."""
    key = (str(path), threads, lookup)
    if key not in _models:
        llama()  # the backend started, llama.cpp's log captured
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        draft = LlamaPromptLookupDecoding(num_pred_tokens=PROMPT_LOOKUP_TOKENS) if lookup else None
        import llama_cpp.llama_cpp as low  # the module `Llama` takes its default parameters from

        with _same_model_params(low):
            # logits_all with a drafter: Llama sizes its score rows from the argument (n_batch rows without it)
            # while a drafter makes it keep every position's, which overflows once a run passes n_batch tokens.
            _models[key] = Llama(
                model_path=str(path),
                n_threads=threads,
                n_threads_batch=threads,
                n_ctx=DEFAULT_CONTEXT,
                n_gpu_layers=0,
                verbose=False,
                draft_model=draft,
                logits_all=lookup,
            )
    return _models[key]


@contextlib.contextmanager
def _same_model_params(L):
    original = L.llama_model_default_params

    def params():
        p = original()
        p.use_extra_bufts = extra_buffer_types()
        return p

    L.llama_model_default_params = params
    try:
        yield
    finally:
        L.llama_model_default_params = original


def grammar(kind: str, spec: str):
    """llama-cpp-python's own grammar for an output format, as its users make one: a JSON schema
    through `LlamaGrammar.from_json_schema` (its GBNF, which allows whitespace specviz's JSON does
    not write), a choice or a GBNF grammar as GBNF; None for free text. Made once per format."""
    if kind == FREE_TEXT:
        return None
    key = (kind, spec)
    if key not in _grammars:
        from llama_cpp import LlamaGrammar

        from specviz.workshop.production.constraint import gbnf

        if kind == JSON_SCHEMA:
            made = LlamaGrammar.from_json_schema(json.dumps(json.loads(spec or ANY_OBJECT)), verbose=False)
        elif (text := gbnf(kind, spec)) is not None:
            made = LlamaGrammar.from_string(text, verbose=False)
        else:
            raise UserError(
                f"llama-cpp-python has no grammar for a {kind} output format (GBNF has no regular expressions)"
            )
        _grammars[key] = made
    return _grammars[key]


def generate(
    llm, prompt_ids: list[int], *, max_new_tokens: int, temperature: float, seed: int, stop_ids, grammar=None
) -> tuple[list[int], float]:
    """One timed generation, prefill and every new token up to a stop id or the limit, under
    `grammar` (a `LlamaGrammar`) where given: the new ids and the seconds."""
    greedy = temperature == 0
    llm.set_seed(seed)
    llm.reset()  # no reuse of an earlier run's cache: every run reads its whole prompt, as specviz's do
    out: list[int] = []
    t0 = time.perf_counter()
    for token in llm.generate(
        prompt_ids,
        top_k=1 if greedy else 0,
        top_p=1.0,
        min_p=0.0,
        temp=0.0 if greedy else temperature,
        repeat_penalty=1.0,
        reset=True,
        grammar=grammar,
    ):
        out.append(int(token))
        if token in stop_ids or len(out) >= max_new_tokens:
            break
    return out, time.perf_counter() - t0
