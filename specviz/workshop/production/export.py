"""What a run found (`found.Found`), as the command or code each engine runs it with.

The names of every flag and argument, with where they come from:

| engine | drafter | names | source |
|---|---|---|---|
| vLLM | model | `--speculative-config '{"model", "num_speculative_tokens"}'` | docs.vllm.ai, Features > Speculative Decoding |
| vLLM | lookup | `{"method": "ngram", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min"}` | the same page, "Speculating by matching n-grams in the prompt" |
| vLLM | suffix | `{"method": "suffix", "num_speculative_tokens"}` (needs `pip install arctic-inference`) | docs.vllm.ai, Features > Speculative Decoding > Suffix Decoding |
| SGLang | model | `--speculative-algorithm STANDALONE --speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk 1 --speculative-num-draft-tokens` | docs.sglang.io, Advanced Features > Speculative Decoding |
| SGLang | tree | the same with `--speculative-eagle-topk` (branching) and `--speculative-num-draft-tokens` (nodes) | the same page |
| SGLang | lookup | `--speculative-algorithm NGRAM --speculative-num-draft-tokens` | the same page |
| llama.cpp | model | `llama-server -m -md --spec-type draft-simple --spec-draft-n-max --spec-draft-n-min` | `common/arg.cpp` vendored in llama-cpp-python 0.3.36 (`llama-server --help`) |
| llama.cpp | lookup | `--spec-type ngram-simple --spec-ngram-simple-size-n --spec-ngram-simple-size-m` | the same file |
| transformers | model | `generate(assistant_model=, num_assistant_tokens=, num_assistant_tokens_schedule="constant")` | transformers' GenerationConfig docs |
| transformers | lookup | `generate(prompt_lookup_num_tokens=)` | the same |
| transformers | early-exit | `generate(assistant_early_exit=)` | the same |
| llama-cpp-python | lookup | `Llama(draft_model=LlamaPromptLookupDecoding(max_ngram_size=, num_pred_tokens=))` | llama-cpp-python's README, "Speculative Decoding" |

A drafter an engine lacks gets a note saying so and no command: nothing here invents a flag.
A run's output format goes beside the speculative settings (`constraint.py` tables how).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from specviz.choices import EARLY_EXIT, HEAD, LOOKUP, MODEL, SUFFIX, TREE
from specviz.app.server_details import file_names
from specviz.errors import UserError, shown
from specviz.workshop.production.constraint import carry
from specviz.workshop.production.found import Found

# specviz's prompt lookup tries n-grams of up to 3 tokens down to 1 (drafters/lookup.py).
LOOKUP_MAX_NGRAM = 3
LOOKUP_MIN_NGRAM = 1

FORMATS = ("vllm", "sglang", "llamacpp", "transformers", "llama-cpp-python")


@dataclass
class Exported:
    format: str
    language: str  # "bash" or "python": how to show `text`
    text: str  # the command or code; "" where the engine lacks the drafter
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"format": self.format, "language": self.language, "text": self.text, "notes": self.notes}


def export(found: Found, fmt: str) -> Exported:
    """`found` as the engine `fmt` (one of FORMATS) runs it."""
    try:
        make = _MAKERS[fmt]
    except KeyError:
        raise UserError(f"unknown export format {shown(fmt)}: choose one of {', '.join(FORMATS)}") from None
    out = make(found)
    # A public page names a model's file by its name alone, not where this server keeps it.
    out.text = file_names(carry(found, fmt, out.text, out.notes))
    out.notes.insert(0, f"k = {found.k}: {found.k_reason}.")
    if found.policy_mean_k is not None or found.hindsight_k is not None:
        mean = f"{found.policy_mean_k:.1f}" if found.policy_mean_k is not None else "none (no round drafted)"
        best = (
            "0 (plain decoding)"
            if found.hindsight_k == 0
            else found.hindsight_k
            if found.hindsight_k is not None
            else "unknown"
        )
        out.notes.insert(
            1, f"The run's mean k over its drafting rounds: {mean}; the best fixed k in hindsight: {best}."
        )
    if found.hindsight_k == 0:
        out.notes.append(
            "In the run this comes from, plain decoding was faster than drafting at every fixed k: "
            "measure on the engine's own hardware before keeping speculation on."
        )
    return out


def _lacks(fmt: str, language: str, found: Found, what: str) -> Exported:
    if found.drafter == HEAD:  # engines draft from a target's own states too, but through heads of their own format
        why = (
            f"{what} has no place for specviz's draft head (its own format, trained here); its EAGLE or MTP "
            "methods read heads trained for them. Nothing to export."
        )
        return Exported(fmt, language, "", [why])
    return Exported(fmt, language, "", [f"{what} has no {found.drafter!r} drafter; nothing to export."])


def _hub(found: Found, fmt: str) -> tuple[str, str | None]:
    if not found.target.hub_id or (
        found.draft is not None and found.drafter in (MODEL, TREE) and not found.draft.hub_id
    ):
        raise UserError(f"{fmt} loads models by Hub id or folder, and the pair {shown(found.pair)} names none")
    return found.target.hub_id, found.draft.hub_id if found.draft is not None else None


def _vllm(found: Found) -> Exported:
    if found.drafter not in (MODEL, LOOKUP, SUFFIX):
        return _lacks("vllm", "bash", found, "vLLM's --speculative-config")
    target, draft = _hub(found, "vLLM")
    notes = ["Per-request acceptance: add --per-request-spec-decode-metrics summary."]
    if found.drafter == MODEL:
        config = {"model": draft, "num_speculative_tokens": found.k}
    elif found.drafter == SUFFIX:
        # vLLM's suffix decoding speculates up to this many tokens a step, as the run's tree had at most this many nodes.
        config = {"method": "suffix", "num_speculative_tokens": found.suffix_max_nodes or found.k}
        notes.append(
            "Suffix decoding needs Arctic Inference (pip install arctic-inference); vLLM's suffix trees also "
            "keep earlier requests' outputs, as the page's session does and the API's runs do not."
        )
    else:
        config = {
            "method": "ngram",
            "num_speculative_tokens": found.k,
            "prompt_lookup_max": LOOKUP_MAX_NGRAM,
            "prompt_lookup_min": LOOKUP_MIN_NGRAM,
        }
    text = f"vllm serve {shlex.quote(target)} \\\n  --speculative-config {shlex.quote(json.dumps(config))}"
    return Exported("vllm", "bash", text, notes)


def _sglang(found: Found) -> Exported:
    target, draft = _hub(found, "SGLang")
    head = f"python -m sglang.launch_server --model-path {shlex.quote(target)}"
    if found.drafter in (MODEL, TREE):  # a chain is a tree one wide with k nodes
        width, nodes = (found.tree_width, found.tree_nodes) if found.drafter == TREE else (1, found.k)
        args = (
            f"--speculative-algorithm STANDALONE --speculative-draft-model-path {shlex.quote(draft)} "
            f"--speculative-num-steps {found.k} --speculative-eagle-topk {width} --speculative-num-draft-tokens {nodes + 1}"
        )
    elif found.drafter == LOOKUP:
        args = f"--speculative-algorithm NGRAM --speculative-num-draft-tokens {found.k + 1}"
    else:
        return _lacks("sglang", "bash", found, "SGLang's --speculative-algorithm")
    return Exported("sglang", "bash", f"{head} \\\n  {args}", [])


def _llamacpp(found: Found) -> Exported:
    if found.drafter not in (MODEL, LOOKUP):
        return _lacks("llamacpp", "bash", found, "llama-server")
    if not found.target.gguf or (found.drafter == MODEL and not (found.draft and found.draft.gguf)):
        raise UserError(f"llama.cpp runs GGUF files, and the pair {shown(found.pair)} has none")
    head = f"llama-server -m {shlex.quote(found.target.gguf)}"
    if found.drafter == MODEL:
        # The draft model loads with -md, but drafts only with --spec-type draft-simple (default: none).
        args = f"-md {shlex.quote(found.draft.gguf)} --spec-type draft-simple --spec-draft-n-max {found.k} --spec-draft-n-min 0"
    else:
        args = f"--spec-type ngram-simple --spec-ngram-simple-size-n {LOOKUP_MAX_NGRAM} --spec-ngram-simple-size-m {found.k}"
    return Exported(
        "llamacpp",
        "bash",
        f"{head} \\\n  {args} --port 8080",
        [
            "Each /completion response's timings carry draft_n and draft_n_accepted: "
            "`python -m specviz metrics` reads them back."
        ],
    )


def _transformers(found: Found) -> Exported:
    target, draft = _hub(found, "transformers")
    lines = [
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f"tokenizer = AutoTokenizer.from_pretrained({target!r})",
        f"model = AutoModelForCausalLM.from_pretrained({target!r})",
    ]
    if found.drafter == MODEL:
        lines.append(f"assistant = AutoModelForCausalLM.from_pretrained({draft!r})")
        kwargs = f'assistant_model=assistant, num_assistant_tokens={found.k}, num_assistant_tokens_schedule="constant"'
    elif found.drafter == LOOKUP:
        kwargs = f"prompt_lookup_num_tokens={found.k}"
    elif found.drafter == EARLY_EXIT:
        kwargs = f"assistant_early_exit={found.early_exit_layers}"
    else:
        return _lacks("transformers", "python", found, "transformers' generate")
    sampling = "do_sample=False" if found.temperature == 0 else f"do_sample=True, temperature={found.temperature}"
    lines += [
        "",
        'inputs = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,',
        '                                       return_tensors="pt", return_dict=True)',
        f"out = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, {sampling}, {kwargs})",
        'print(tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))',
    ]
    return Exported(
        "transformers",
        "python",
        'PROMPT = "Write a Python function that reverses a string."\nMAX_NEW_TOKENS = 64\n' + "\n".join(lines),
        [],
    )


def _llama_cpp_python(found: Found) -> Exported:
    if found.drafter != LOOKUP:
        return _lacks("llama-cpp-python", "python", found, "llama-cpp-python (its only drafter is prompt lookup)")
    if not found.target.gguf:
        raise UserError(f"llama-cpp-python runs GGUF files, and the pair {shown(found.pair)} has none")
    text = "\n".join(
        [
            "from llama_cpp import Llama",
            "from llama_cpp.llama_speculative import LlamaPromptLookupDecoding",
            "",
            f"llm = Llama(model_path={found.target.gguf!r}, n_ctx=4096, verbose=False,",
            f"            draft_model=LlamaPromptLookupDecoding(max_ngram_size={LOOKUP_MAX_NGRAM}, num_pred_tokens={found.k}))",
            'out = llm.create_chat_completion([{"role": "user", "content": "Write a Python function that reverses a string."}],',
            f"                                 max_tokens=64, temperature={found.temperature})",
            'print(out["choices"][0]["message"]["content"])',
        ]
    )
    return Exported("llama-cpp-python", "python", text, [])


_MAKERS = {
    "vllm": _vllm,
    "sglang": _sglang,
    "llamacpp": _llamacpp,
    "transformers": _transformers,
    "llama-cpp-python": _llama_cpp_python,
}
