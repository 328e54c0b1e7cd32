"""Output formats: refused in one line before any model runs, bounded against hostile input,
compiled to a matcher that allows, forbids and forces the right tokens, a proposal pruned and
completed under it, and a finished output checked by a reader other than the engine."""

from __future__ import annotations

import json
import time

import pytest
import torch

from specviz.choices import CHOICE, FREE_TEXT, GRAMMAR, JSON_SCHEMA, REGEX
from specviz.drafters.base import Proposal, SourceNote
from specviz.errors import UserError
from specviz.grammar import formats
from specviz.grammar.matcher import Grammar
from specviz.grammar.walk import walk
from specviz.limits import LimitError
from specviz.settings import GenerationSettings, from_request
from tiny_models import tiny_tokenizer

PERSON = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
)


def refusal(kind: str, spec: str) -> str:
    with pytest.raises(UserError) as e:
        from_request({"output_format": kind, "output_spec": spec})
    message = str(e.value)
    assert "\n" not in message and message, message
    return message


@pytest.mark.parametrize(
    "kind, spec, words",
    [
        (JSON_SCHEMA, '{"type": ', "not JSON"),
        (JSON_SCHEMA, "[1, 2]", "a JSON schema is a JSON object"),
        (JSON_SCHEMA, '{"type": "strin"}', "Invalid type: strin"),
        (REGEX, "[a-z", "unclosed character class"),
        (REGEX, "", "empty"),
        (CHOICE, "[1, 2]", "strings only"),
        (CHOICE, "\n \n", "at least one string"),
        (GRAMMAR, "start: missing_rule", "unknown name"),
        (GRAMMAR, "root ::= (", "cannot be read"),
        (FREE_TEXT, "anything", "free text takes no schema"),
        ("xml", "", "output format must be one of"),
    ],
)
def test_a_bad_output_format_gets_one_line_naming_the_problem(kind, spec, words):
    assert words in refusal(kind, spec)


def test_good_formats_are_accepted_and_compiled_once():
    for kind, spec in [(JSON_SCHEMA, PERSON), (JSON_SCHEMA, ""), (REGEX, "[0-9]+"), (CHOICE, '["a", "b"]')]:
        assert from_request({"output_format": kind, "output_spec": spec}).output_format == kind
    assert formats.parse(GRAMMAR, 'root ::= "yes" | "no"').kind == GRAMMAR  # llama.cpp's GBNF, converted
    assert formats.parse(JSON_SCHEMA, PERSON) is formats.parse(JSON_SCHEMA, PERSON)
    assert formats.parse(FREE_TEXT, "") is None
    assert formats.parse(CHOICE, "yes\nno\n\nmaybe").choices == ["yes", "no", "maybe"]


def _deep(levels: int) -> str:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return json.dumps(schema)


@pytest.mark.parametrize(
    "kind, spec, limit",
    [
        (JSON_SCHEMA, _deep(200), "the schema's nesting is 401; the limit is 24 (SPECVIZ_MAX_FORMAT_DEPTH)"),
        (
            JSON_SCHEMA,
            json.dumps({"enum": [f"v{i}" for i in range(1500)]}),
            "the alternatives is 1,500; the limit is 1,000 (SPECVIZ_MAX_FORMAT_ALTERNATIVES)",
        ),
        (CHOICE, "\n".join(f"c{i}" for i in range(2000)), "the alternatives is 2,000; the limit is 1,000"),
        (REGEX, "a" * 40_000, "the output format is 40,000 characters; the limit is 32,000 characters"),
    ],
    ids=["deep", "enum", "choices", "long"],
)
def test_a_hostile_format_is_refused_fast_in_one_line(kind, spec, limit):
    start = time.perf_counter()
    with pytest.raises(LimitError) as e:
        formats.parse(kind, spec)
    assert limit in str(e.value)
    assert time.perf_counter() - start < 1.0  # refused before any compiling grows with it
    with pytest.raises(LimitError, match=limit.split(";")[0]):  # the settings refuse it in the same words
        GenerationSettings(output_format=kind, output_spec=spec)


def test_the_compile_limits_refuse_a_grammar_over_them(monkeypatch):
    monkeypatch.setenv("SPECVIZ_MAX_GRAMMAR_SIZE", "50")
    formats._compiled.cache_clear()
    spec = json.dumps({"type": "object", "properties": {f"key{i}": {"type": "integer"} for i in range(40)}})
    with pytest.raises(formats.FormatError, match="cannot be used"):
        formats.parse(JSON_SCHEMA, spec)
    formats._compiled.cache_clear()


def test_a_regular_expression_that_backtracks_for_ever_in_pythons_re_costs_bounded_time():
    fmt = formats.parse(REGEX, "(x+x+)+y")
    tok = tiny_tokenizer()
    g = Grammar(fmt, tok, len(tok), [tok.eos_token_id])
    start = time.perf_counter()
    x = tok.convert_tokens_to_ids("x")
    path = []
    for _ in range(30):  # the matcher's lexer is an automaton, not a backtracking search
        assert bool(g.allowed(path)[x])
        path.append(x)
    check = formats.check_output(fmt, "x" * 30, "max_new_tokens")
    assert time.perf_counter() - start < 2.0
    assert check.startswith("cut by the token limit") or check.startswith("not checked")


def test_a_finished_output_is_checked_by_an_independent_reader():
    person = formats.parse(JSON_SCHEMA, PERSON)
    assert formats.check_output(person, '{"name": "Ada", "age": 36}', "eos") == "valid"
    assert formats.check_output(person, '{"name": "Ada", "age": "36"}', "eos").startswith("invalid: the schema")
    assert formats.check_output(person, '{"name": "Ada", "ag', "max_new_tokens").startswith(
        "cut by the token limit: not JSON"
    )
    assert formats.check_output(formats.parse(REGEX, "[0-9]{3}"), "123", "eos") == "valid"
    assert formats.check_output(formats.parse(REGEX, "[0-9]{3}"), "1234", "eos").startswith("invalid")
    assert formats.check_output(None, "anything", "eos") == ""


@pytest.fixture(scope="module")
def person():
    tok = tiny_tokenizer()
    return Grammar(formats.parse(JSON_SCHEMA, PERSON), tok, len(tok), [tok.eos_token_id]), tok


def ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def test_the_matcher_allows_forbids_and_forces_tokens_after_a_path(person):
    g, tok = person
    forced = g.forced()
    # The forced text, short of what could still join the next token into a longer one.
    assert forced and '{"name": "'.startswith(tok.decode(forced))
    assert g.allowed()[forced[0]] and g.allowed().sum() >= 1
    after = g.allowed(forced)
    assert not after[tok.eos_token_id]  # the object is not closed yet
    bad = ids(tok, "\n")[0]  # a raw newline inside a JSON string
    assert not after[bad] and g.allowed([*forced, bad]).sum() == 0  # nothing after a forbidden token
    assert g.allowed([tok.eos_token_id]).all()  # after a stop token the run has ended: any row will do
    assert g.allowed(forced).sum() > 1  # after the forced text the model has a choice


def test_the_matcher_advances_only_on_kept_tokens_and_allows_a_stop_at_the_end(person):
    g0, tok = person
    g = Grammar(g0.format, tok, g0.vocab_size, [tok.eos_token_id])
    text = ids(tok, '{"name": "Ada", "age": 36}')
    for t in text[:-1]:  # asking about paths moves nothing
        g.allowed(text[:3])
        assert g.allowed()[t], tok.decode([t])
        g.advance([t])
    assert not g.allowed()[tok.eos_token_id]
    g.advance(text[-1:])
    assert g.allowed()[tok.eos_token_id] and g.allowed().sum() == 1
    with pytest.raises(UserError, match="left its grammar"):
        g.advance(ids(tok, "x"))


def test_walk_cuts_a_chain_at_its_first_forbidden_token_and_adds_the_forced_ones(person):
    g, tok = person
    first = g.forced()[0]
    chain = [first, *ids(tok, "\n ab")]  # a raw newline cannot follow `{"` (nor anything else)
    q = torch.full((len(chain), g.vocab_size), 1.0 / g.vocab_size)
    w = walk(g, Proposal(tokens=torch.tensor(chain), q=q, confidence=[0.5] * len(chain)), room=16)
    kept = w.proposal.tokens.tolist()
    tail = g.forced([first])
    assert tail and kept == [first, *tail]  # cut after `{"`, then the grammar's own continuation
    assert w.proposal.forced == list(range(1, len(kept)))
    assert w.proposal.confidence == [0.5] + [1.0] * len(tail)
    assert torch.equal(w.proposal.q[1:], torch.nn.functional.one_hot(torch.tensor(tail), g.vocab_size).float())
    rows = w.proposal.allowed
    assert rows.shape == (len(kept) + 1, g.vocab_size)
    for i in range(len(kept) + 1):
        assert torch.equal(rows[i], g.allowed(kept[:i]))
    assert w.heard([0, 1]) == [0, 1]  # a chain's drafter hears the path as it is


def test_walk_drops_a_forbidden_branch_of_a_tree_with_what_hangs_under_it():
    tok = tiny_tokenizer()
    g = Grammar(formats.parse(REGEX, "[ab][cd]e"), tok, len(tok), [tok.eos_token_id])
    a, c, d, z = (ids(tok, ch)[0] for ch in "acdz")
    # root -> a -> (c, d); root -> z -> c: z is forbidden, and its child goes with it.
    tokens, parents = [a, z, c, d, c], [-1, -1, 0, 0, 1]
    note = SourceNote("suffix", counts=[5, 4, 3, 2, 1])
    w = walk(g, Proposal(tokens=torch.tensor(tokens), q=None, parents=parents, source=note), room=16)
    p = w.proposal
    e = ids(tok, "e")[0]
    assert p.tokens.tolist() == [a, c, d, e] and p.parents == [-1, 0, 0, 1]  # `e` forced after a, c
    assert p.forced == [3] and p.source.counts == [5, 3, 2, 0]
    assert w.origin == [0, 2, 3, -1]
    assert w.heard([0, 1, 3]) == [0, 2]  # the drafter hears its own nodes, by its own indices


def test_walk_never_goes_past_the_room_left(person):
    g, tok = person
    w = walk(g, Proposal.empty(torch.tensor([1, 2, 3])), room=1)
    assert w.proposal.tokens.numel() <= 1
    w = walk(g, Proposal.empty(torch.tensor([1, 2, 3])), room=0)
    assert w.proposal.tokens.numel() == 0 and w.proposal.allowed.shape[0] == 1


def test_the_command_line_takes_the_format_and_a_schema_from_a_file(tmp_path):
    import argparse

    from specviz.workshop import generate_cli as cli

    path = tmp_path / "person.json"
    path.write_text(PERSON, encoding="utf-8")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--prompt", "x", "--output-format", JSON_SCHEMA, "--output-spec", f"@{path}"])
    assert cli.settings_from(args).output_spec == PERSON
    bad = parser.parse_args(["--prompt", "x", "--output-format", JSON_SCHEMA, "--output-spec", "@/no/such/file"])
    with pytest.raises(UserError, match="cannot read the output format"):
        cli.settings_from(bad)
    with pytest.raises(SystemExit):  # argparse lists the formats
        parser.parse_args(["--prompt", "x", "--output-format", "xml"])


def test_a_chain_starting_where_the_grammar_forces_tokens_leads_with_them_and_drafts_none_of_them(person):
    from specviz.drafters.base import draft_chain
    from specviz.lm.sampling import Sampler

    g, tok = person
    lead = g.forced()
    assert lead
    sampler = Sampler(GenerationSettings(temperature=1.0), g.vocab_size)
    sampler.grammar = g
    fed_first = []

    def step(fed: torch.Tensor) -> torch.Tensor:
        fed_first.append(fed.tolist())
        return torch.zeros(g.vocab_size)  # every allowed token equally likely

    start = time.perf_counter()
    p = draft_chain(step, torch.tensor([7]), 2, lambda c: True, set(), sampler, torch.Generator().manual_seed(0), start)
    assert p.tokens.tolist()[: len(lead)] == lead and p.forced[: len(lead)] == list(range(len(lead)))
    assert fed_first[0] == [7, *lead]  # the forced tokens go in with the context, before the first pass
    assert p.passes == 2 and len(p.tokens) >= len(lead) + 2
    assert torch.equal(p.q[: len(lead)], torch.nn.functional.one_hot(torch.tensor(lead), g.vocab_size).float())
    drafted = [i for i in range(len(p.tokens)) if i not in p.forced]
    assert all(g.allowed(p.tokens.tolist()[:i])[p.tokens[i]] for i in drafted)  # drafted under the mask
