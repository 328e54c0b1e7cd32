"""From the page to production: engine metrics read back (payloads in tests/data/production,
each figure below worked out by hand from the payload), the verdict's arithmetic, the best
fixed k in hindsight, a run's metrics block, and the exports."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from specviz.choices import HEAD
from specviz import run_stats
from specviz.errors import UserError
from specviz.events import DraftToken, EmittedToken, RoundEvent
from specviz.workshop.production import export, found, judge, metrics

DATA = Path(__file__).parent / "data" / "production"


def _read(name: str) -> list[metrics.Counts]:
    return metrics.read((DATA / name).read_bytes())


def test_vllms_per_request_json_gives_its_counts_and_the_rates_by_position():
    # The response captured in mostlygeek/llama-swap issue #1032 (vLLM PR #48915's format):
    # histogram [39, 1, 0, 3] over 43 steps of 3 drafts. Accepted at position 1: the steps
    # that accepted 1 or more, 1 + 0 + 3 = 4; at 2: 0 + 3 = 3; at 3: 3.
    (c,) = _read("vllm_request.json")
    assert (c.engine, c.steps, c.draft_tokens, c.accepted, c.k) == ("vLLM", 43, 129, 10, 3)
    assert c.per_position == [4, 3, 3]
    assert c.unconditional == pytest.approx([4 / 43, 3 / 43, 3 / 43])
    assert c.conditional == pytest.approx([4 / 43, 3 / 4, 1.0])
    assert c.mean_length_with_bonus == pytest.approx(1.2325581395348837)  # the payload's own figure
    assert c.acceptance_rate == pytest.approx(0.07751937984496124)
    assert c.mean_length_without_bonus == pytest.approx(10 / 43)


def test_prometheus_text_with_two_models_two_scrapes_a_restart_and_no_per_position_series():
    a, b = _read("vllm_two_models.prom")
    # model-a between the scrapes: 50 drafts, 150 drafted, 90 accepted; by position 45, 30, 15.
    assert (a.model, a.steps, a.draft_tokens, a.accepted, a.per_position) == ("model-a", 50, 150, 90, [45, 30, 15])
    assert a.unconditional == pytest.approx([0.9, 0.6, 0.3])
    assert a.conditional == pytest.approx([0.9, 30 / 45, 0.5])
    assert a.mean_length_with_bonus == pytest.approx(2.8)
    # model-b restarted: the later counters are what it counted since.
    assert (b.model, b.steps, b.draft_tokens, b.accepted, b.per_position) == ("model-b", 20, 40, 30, None)
    assert b.mean_length_with_bonus == pytest.approx(2.5) and b.unconditional is None
    assert any("restarted" in n for n in b.notes) and any("by position is left out" in n for n in b.notes)


def test_sglangs_meta_info_counts_each_verify_step_as_its_accepted_drafts_and_one_token():
    (c,) = _read("sglang_meta_info.json")
    # 64 tokens over 20 verify steps: 44 accepted drafts; 44 / 0.55 = 80 drafted, 4 a step.
    assert (c.engine, c.steps, c.accepted, c.draft_tokens, c.k) == ("SGLang", 20, 44, 80, 4)
    assert c.mean_length_with_bonus == pytest.approx(3.2)  # SGLang's own spec_accept_length


@pytest.mark.parametrize(
    "payload,names",
    [
        ('{"choices": []}', "metrics.speculative_decoding"),
        (
            '{"metrics": {"speculative_decoding": {"num_spec_steps": 3, "num_draft_tokens": 9}}}',
            "num_accepted_draft_tokens",
        ),
        ('{"meta_info": {"spec_verify_ct": "many", "completion_tokens": 9}}', "spec_verify_ct"),
        ('{"timings": {"draft_n": 12}}', "draft_n_accepted"),
        (
            "vllm:spec_decode_num_drafts_total 4\nvllm:spec_decode_num_accepted_tokens_total 3",
            "spec_decode_num_draft_tokens",
        ),
        ("process_cpu_seconds_total 12.5", "no speculative decoding counters"),
        ("hello there", "neither JSON nor Prometheus text"),
        (
            '{"metrics": {"speculative_decoding": {"num_spec_steps": 3, "num_draft_tokens": 9, "num_accepted_draft_tokens": 2, '
            '"acceptance_histogram": [1, 1]}}}',
            "acceptance_histogram counts 2 steps",
        ),
        ("", "nothing to read"),
        (b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_a_malformed_payload_is_one_line_naming_what_is_missing(payload, names):
    with pytest.raises(metrics.MetricsError) as e:
        metrics.read(payload)
    assert names in str(e.value) and "\n" not in str(e.value)


def test_the_verdict_prices_a_step_as_k_drafts_and_a_pass_over_k_plus_one():
    (c,) = _read("vllm_request.json")
    # T = 10, D = 2, a verify pass 12: a step costs 3 * 2 + 12 = 18 ms for 1.2326 tokens,
    # against 10 ms a token plainly: 12.326 / 18 = 0.685x.
    j = judge.judge(c, judge.typed_cost(10, 2, 12))
    assert j.speedup == pytest.approx(10 * (1 + 10 / 43) / 18)
    assert j.verdict.startswith("This drafter costs you: 0.68x")
    (a, _) = _read("vllm_two_models.prom")
    # On a flat GPU-like curve with free drafts: 2.8 tokens a step for one pass, 2.8x.
    helps = judge.judge(a, judge.typed_cost(10))
    assert helps.speedup == pytest.approx(2.8) and helps.verdict.startswith("This drafter helps: 2.80x")
    even = judge.judge(a, judge.typed_cost(10, 0, 28))  # a pass over 4 tokens costs 2.8 passes
    assert even.speedup == pytest.approx(1.0) and even.verdict.startswith("This drafter breaks even")
    with pytest.raises(UserError):
        judge.typed_cost(0)
    assert judge.judge(a, None).speedup is None


def _round(index: int, drafted: int, accepted: int) -> RoundEvent:
    tokens = [
        DraftToken(
            id=i,
            text="x",
            p=1.0,
            q=1.0,
            u=None,
            decision="accepted" if i < accepted else "rejected" if i == accepted else "unchecked",
        )
        for i in range(drafted)
    ]
    return RoundEvent(
        index=index,
        k=drafted,
        drafted=tokens,
        emitted=EmittedToken(id=9, text="y", p=1.0, kind="bonus"),
        positions=[],
        draft_ms=1.0,
        verify_ms=10.0,
        t_end_s=0.1 * index,
        new_tokens=0,
    )


FLAT = {"verify": {"1": 10.0, "17": 10.0}, "draft": 1.0}


def test_the_best_fixed_k_in_hindsight_credits_no_token_beyond_what_a_round_showed():
    events = [_round(0, 4, 4), _round(1, 4, 1)]
    # Passes cost 10 ms at any size, drafts 1 ms. k = 1: 2 + 2 tokens in 22 ms (0.182 a ms);
    # 2: 3 + 2 in 24 (0.208); 3: 4 + 2 in 26 (0.231); 4: 5 + 2 in 28 (0.25); 5: still 5 + 2,
    # the first round having shown only 4 accepted, in 30 (0.233). Plain: 0.1.
    assert found.best_fixed_k(events, FLAT) == 4
    dear = {"verify": {"1": 10.0, "2": 30.0, "17": 300.0}, "draft": 20.0}  # drafting never pays
    assert found.best_fixed_k(events, dear) == 0
    assert found.best_fixed_k(events, None) is None


def test_a_runs_metrics_block_uses_vllms_names_and_the_import_reads_it_back():
    events = [_round(0, 4, 4), _round(1, 4, 1), _round(2, 0, 0)]
    block = run_stats.request_metrics(events)
    # Two steps drafted (the third decoded plainly): 8 drafted, 5 accepted, histogram 0..4.
    assert block == {
        "mean_acceptance_length": 3.5,
        "draft_acceptance_rate": 5 / 8,
        "acceptance_histogram": [0, 1, 0, 0, 1],
        "num_spec_steps": 2,
        "num_accepted_draft_tokens": 5,
        "num_draft_tokens": 8,
        "num_spec_tokens": 4,
    }
    (c,) = metrics.read(json.dumps({"pair": "qwen-coder", "events": [], "metrics": {"speculative_decoding": block}}))
    assert (c.engine, c.steps, c.accepted, c.per_position) == ("specviz", 2, 5, [2, 1, 1, 1])


def _found(drafter: str, **kw) -> found.Found:
    model = found.Model("Target", "org/target", "/models/target.gguf")
    draft = found.Model("Draft", "org/draft", "/models/draft.gguf")
    return found.Found(pair="p", target=model, draft=draft, drafter=drafter, k=kw.pop("k", 5), k_reason="as set", **kw)


def test_each_engine_gets_its_own_names_and_a_drafter_it_lacks_says_so():
    vllm = export.export(_found("model"), "vllm")
    assert json.loads(vllm.text.split("--speculative-config ")[1].strip("'")) == {
        "model": "org/draft",
        "num_speculative_tokens": 5,
    }
    ngram = export.export(_found("lookup"), "vllm").text
    assert '"method": "ngram"' in ngram and '"prompt_lookup_max": 3' in ngram and '"prompt_lookup_min": 1' in ngram
    sglang = export.export(_found("tree", tree_nodes=12, tree_width=3), "sglang").text
    assert "--speculative-eagle-topk 3" in sglang and "--speculative-num-draft-tokens 13" in sglang
    assert "--speculative-algorithm NGRAM" in export.export(_found("lookup"), "sglang").text
    server = export.export(_found("model"), "llamacpp").text
    assert "-md /models/draft.gguf --spec-type draft-simple --spec-draft-n-max 5 --spec-draft-n-min 0" in server
    assert "--spec-type ngram-simple" in export.export(_found("lookup"), "llamacpp").text
    assert "assistant_early_exit=6" in export.export(_found("early-exit", early_exit_layers=6), "transformers").text
    lacking = export.export(_found("tree"), "vllm")
    assert lacking.text == "" and any("has no 'tree' drafter" in n for n in lacking.notes)
    suffix = export.export(_found("suffix", suffix_max_nodes=24), "vllm")
    assert json.loads(suffix.text.split("--speculative-config ")[1].strip("'")) == {
        "method": "suffix",
        "num_speculative_tokens": 24,
    }
    assert any("arctic-inference" in n for n in suffix.notes)
    for fmt in export.FORMATS:  # no engine here runs lookahead's Jacobi window, nor suffix decoding but vLLM
        assert export.export(_found("lookahead"), fmt).text == ""
    for fmt in export.FORMATS:  # nor a specviz draft head: engines read heads of their own format
        head = export.export(_found(HEAD), fmt)
        assert head.text == "" and any("specviz's draft head" in n for n in head.notes)
        assert fmt == "vllm" or export.export(_found("suffix"), fmt).text == ""
    assert export.export(_found("model"), "llama-cpp-python").text == ""
    unpaid = export.export(_found("model", hindsight_k=0), "llamacpp")
    assert any("plain decoding was faster" in n for n in unpaid.notes)
    with pytest.raises(UserError, match="unknown export format"):
        export.export(_found("model"), "tgi")


def _run_snippet(text: str, **names) -> str:
    out = io.StringIO()
    code = "\n".join(line for line in text.splitlines() if not line.startswith(tuple(f"{n} =" for n in names)))
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<exported>", "exec"), dict(names))
    return out.getvalue()


def test_the_exported_transformers_snippet_runs_assisted_generation_on_a_tiny_pair(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from specviz.settings import GenerationSettings
    from tiny_models import tiny_model, tiny_tokenizer

    folders = {}
    for role, seed in (("target", 0), ("draft", 1)):
        folders[role] = tmp_path / role
        tiny_model(seed).save_pretrained(folders[role])
        tiny_tokenizer().save_pretrained(folders[role])
    what = found.from_settings(
        f"{folders['draft']} -> {folders['target']}", GenerationSettings(drafter="model", k=3, policy="fixed")
    )
    snippet = export.export(what, "transformers")
    assert "num_assistant_tokens=3" in snippet.text
    prompt = "def reverse(s):"
    printed = _run_snippet(snippet.text, PROMPT=prompt, MAX_NEW_TOKENS=8)
    # Assisted greedy generation gives the target's own greedy text.
    tok = tiny_tokenizer()
    model = AutoModelForCausalLM.from_pretrained(folders["target"])
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        plain = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    assert printed.strip() == tok.decode(plain[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    assert printed.strip()


def test_a_live_llama_server_response_and_its_metrics_agree_on_the_same_request():
    # Captured from llama-server serving the bundled pair (tests/data/production/README.md).
    (r,) = _read("llamacpp_completion.json")
    # 48 tokens, 30 of them accepted drafts: 18 target passes (17 that verified drafts and the
    # prefill's), 48 / 18 = 2.67 tokens a pass; 49 drafted.
    assert (r.engine, r.tokens, r.accepted, r.draft_tokens, r.passes) == ("llama.cpp", 48, 30, 49, 18)
    assert r.mean_length_with_bonus == pytest.approx(48 / 18)
    (m,) = _read("llamacpp_metrics.prom")
    # /metrics: 17 steps, 49 drafted, 30 accepted, 12 + 11 + 7 by position: 1 + 30 / 17 = 2.76.
    assert (m.engine, m.steps, m.draft_tokens, m.accepted, m.per_position) == ("llama.cpp", 17, 49, 30, [12, 11, 7])
    assert m.mean_length_with_bonus == pytest.approx(1 + 30 / 17)
    assert m.conditional == pytest.approx([12 / 17, 11 / 12, 7 / 11])
