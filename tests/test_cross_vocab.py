"""Pairs whose draft has its own tokenizer: the vocabulary map, drafting through text and
through the shared tokens.

The two tiny tokenizers are byte-level BPEs trained on the same corpus with different merges:
the target's splits on words first (like Qwen's), the draft's merges across spaces and has
another size and special-token order, so draft token boundaries really fall inside target
tokens and the other way round, and no id means the same in both.

Monte Carlo test: N = 20,000 independent single-position rounds (fixed seed); each target
token expected at least 5 times must land within 5 standard errors, sqrt(p (1 - p) / N), of
its probability, the rarer ones pooled into one bucket held to the same bound (as in
tests/test_verify.py).
"""

from __future__ import annotations

import functools

import pytest
import torch
from test_verify import SIGMAS, assert_matches  # the chain rule's check, with its tolerance
from tiny_models import CHAT_TEMPLATE, CORPUS, single_thread, tiny_model, tiny_tokenizer  # noqa: F401 (single_thread: a fixture)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from specviz.drafters.cross_vocab import IntersectionDrafter, TextDrafter, make_cross_drafter, to_target
from specviz.engine.verify import verify
from specviz.errors import UserError
from specviz.lm.torch_runtime.cached import CachedLM, model_forward
from specviz.lm.sampling import Sampler
from specviz.lm.pair import ModelPair
from specviz.models.alignment.vocab_map import INTERSECTION_MIN_OVERLAP, TokenText, default_method, vocab_map
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")

GREEDY = GenerationSettings(temperature=0.0)
PROMPTS = ["def reverse(s):", "The quick brown fox", "héllo wörld 🙂 for i in"]


@functools.lru_cache(maxsize=None)
def draft_tokenizer() -> PreTrainedTokenizerFast:
    """340 entries, merges across spaces (no word pre-split), specials in another order."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=340,
        special_tokens=["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )


@functools.lru_cache(maxsize=None)
def draft_model(seed: int = 7) -> Qwen2ForCausalLM:
    tok = draft_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        initializer_range=0.6,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval()


def cross_pair() -> ModelPair:
    tok = tiny_tokenizer()
    return ModelPair(
        name="tiny-cross",
        tokenizer=tok,
        target=tiny_model(0),
        draft=draft_model(),
        vocab_size=len(tok),
        device=torch.device("cpu"),
        dtype=torch.float32,
        draft_tokenizer=draft_tokenizer(),
    )


def boundaries(tokenizer, text: str) -> set[int]:
    table, at, out = TokenText(tokenizer).table, 0, set()
    for i in tokenizer(text, add_special_tokens=False)["input_ids"]:
        at += len(table[i])
        out.add(at)
    return out


def test_the_two_tiny_tokenizers_really_differ():
    text = "".join(CORPUS)
    target_cuts, draft_cuts = boundaries(tiny_tokenizer(), text), boundaries(draft_tokenizer(), text)
    assert len(draft_cuts - target_cuts) >= 20 and len(target_cuts - draft_cuts) >= 20  # boundaries straddle both ways
    im_end = "<|im_end|>"
    assert draft_tokenizer().convert_tokens_to_ids(im_end) != tiny_tokenizer().convert_tokens_to_ids(im_end)


# --- the vocabulary map ---------------------------------------------------------------------


def bpe_from_vocab(strings: list[str], kind: str) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE({s: i for i, s in enumerate(strings)}, [], byte_fallback=kind == "metaspace"))
    if kind == "byte-level":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Sequence([decoders.Metaspace(), decoders.ByteFallback()])
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_space_markers_and_byte_tokens_compare_by_the_text_they_stand_for():
    # byte-level: Ġ is a space, Ċ a newline, Ã© the two bytes of é
    target = bpe_from_vocab(["Ġthe", "Ċ", "Ã©", "the", "Ġcat", "x", "Ġ"], "byte-level")
    # SentencePiece: ▁ is a space, <0x0A> a newline byte; ▁ and <0x20> both stand for a space
    draft = bpe_from_vocab(["<0x20>", "é", "▁the", "<0x0A>", "dog", "the", "▁"], "metaspace")
    m = vocab_map(draft, target)
    assert (m.draft_scheme, m.target_scheme) == ("metaspace", "byte-level")
    expected = {2: 0, 3: 1, 1: 2, 5: 3, 6: 6}  # ▁the->Ġthe, <0x0A>->Ċ, é->Ã©, the->the, ▁->Ġ
    assert {d: int(t) for d, t in enumerate(m.draft_to_target.tolist()) if t >= 0} == expected
    assert m.draft_to_target[0] == -1  # <0x20> loses to the regular ▁ for the same space: one-to-one
    assert m.shared == 5 and m.overlap == pytest.approx(5 / 7)
    assert m.target_to_draft.tolist() == [2, 3, 1, 5, -1, -1, 6]
    assert not m.identical


def test_identical_vocabularies_are_marked_the_same():
    m = vocab_map(tiny_tokenizer(), tiny_tokenizer())
    assert m.identical and m.method == "same" and m.overlap == 1.0


def test_default_method_threshold():
    assert INTERSECTION_MIN_OVERLAP == 0.5
    assert default_method(0.5)[0] == "intersection" and default_method(0.93)[0] == "intersection"
    assert default_method(0.49)[0] == "text" and default_method(0.0)[0] == "text"
    method, reason = default_method(0.3)
    assert "30.0%" in reason and "below 50%" in reason


def test_the_tiny_pair_lines_up_its_shared_tokens():
    m = vocab_map(draft_tokenizer(), tiny_tokenizer())
    d, t = draft_tokenizer(), tiny_tokenizer()
    for s in ("<|im_end|>", "Ġs", "de", "Ċ"):
        assert m.draft_to_target[d.convert_tokens_to_ids(s)] == t.convert_tokens_to_ids(s)
    assert m.draft_to_target[d.convert_tokens_to_ids("fĠ")] == -1  # crosses a space: not in the target's
    assert 0.5 < m.overlap < 1 and m.method == "intersection"


def test_token_text_round_trips_any_bytes_even_half_characters():
    text = TokenText(tiny_tokenizer())
    data = "héllo wörld, 日本語 🙂🚀 <|im_end|>".encode()
    for cut in range(len(data) + 1):
        for piece in (data[:cut], data[cut:]):
            assert text.bytes(text.encode(piece)) == piece
    assert text.encode(b"<|im_end|>") == [tiny_tokenizer().convert_tokens_to_ids("<|im_end|>")]


def test_drafted_text_becomes_target_tokens_across_the_join():
    t = tiny_tokenizer()
    text = TokenText(t)
    context = t("x = reverse", add_special_tokens=False)["input_ids"]
    # The draft wrote "(s):\n    return": the target reads "):" and "\n   " as tokens that
    # the draft's split ("(s", "):\n    re", ...) cuts through.
    ids, spans = to_target(text, context, b"(s):\n    return")
    assert t.convert_ids_to_tokens(ids) == ["(", "s", "):", "ĊĠĠĠ", "Ġre", "tu", "rn"]
    assert spans[0] == (0, 1) and spans[-1][1] == len(b"(s):\n    return")
    # A committed target token that the new text would merge with stays as committed.
    context = t("print(rev", add_special_tokens=False)["input_ids"]
    ids, _ = to_target(text, context, b"erse")
    assert text.bytes(context + ids) == b"print(reverse" and ids


# --- speculative rounds, written out as the engine runs them ---------------------------------


@torch.inference_mode()
def plain_greedy(model, prompt_ids: list[int], n: int) -> list[int]:
    lm = CachedLM(model_forward(model), model.config, torch.device("cpu"))
    ids = list(prompt_ids)
    logits = lm.feed(torch.tensor(ids))[-1]
    for _ in range(n):
        ids.append(int(logits.argmax()))
        logits = lm.feed(torch.tensor(ids[-1:]))[-1]
    return ids[len(prompt_ids) :]


@torch.inference_mode()
def speculative(model, drafter, prompt_ids: list[int], n: int, k: int, settings=GREEDY, seed: int = 0):
    """The engine's round (engine/speculative.py) with `drafter`: returns the new tokens, the
    number of accepted drafts and the proposals."""
    lm = CachedLM(model_forward(model), model.config, torch.device("cpu"))
    sampler = Sampler(settings, model.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(prompt_ids)
    lm.feed(ids[:-1])
    drafter.begin(ids)
    accepted, proposals = 0, []
    while ids.numel() - len(prompt_ids) < n:
        remaining = n - (ids.numel() - len(prompt_ids))
        proposal = drafter.propose(ids, min(k, remaining - 1), lambda c: True)
        proposals.append(proposal)
        x = proposal.tokens
        assert x.numel() <= min(k, remaining - 1)
        logits = sampler.logits(lm.feed(torch.cat([ids[-1:], x]), keep=0))
        p = None if sampler.greedy else sampler.distribution(logits)
        v = verify(x, logits if sampler.greedy else p, proposal.q, generator=g, greedy=sampler.greedy)
        lm.crop(ids.numel() + v.n_accepted)
        ids = torch.cat([ids, torch.tensor(v.new_tokens)])
        drafter.accepted(v.n_accepted)
        accepted += v.n_accepted
    return ids[len(prompt_ids) :].tolist(), accepted, proposals


def encode(prompt: str) -> list[int]:
    t = tiny_tokenizer()
    text = t.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
    return t(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("method", ["text", "intersection"])
@pytest.mark.parametrize("k", [2, 5])
def test_greedy_equals_the_targets_plain_greedy_with_a_real_tiny_draft(method, k):
    pair = cross_pair()
    for prompt in PROMPTS:
        ids = encode(prompt)
        expected = plain_greedy(pair.target, ids, 24)
        drafter = make_cross_drafter(pair, GREEDY, None, method)
        got, _, proposals = speculative(pair.target, drafter, ids, 24, k)
        assert got == expected, (method, k, prompt)
        assert all(0 <= t < pair.vocab_size for p in proposals for t in p.tokens.tolist())


class OracleLM:
    """Stands in for a draft model that knows the text the target will write: after its own
    tokens so far it scores highest a draft token that continues that text. It cuts the text
    its own way: every 3rd step the shortest continuing token instead of the longest (a split
    its tokenizer would not make), and every 7th step a wrong token."""

    def __init__(self, text: TokenText, reference: bytes, vocab: int):
        self.text, self.reference, self.vocab = text, reference, vocab
        self.reset()

    def reset(self) -> None:
        self.history: list[int] = []
        self.length = 0
        self.steps = 0

    def crop(self, length: int) -> None:
        del self.history[length:]
        self.length = min(self.length, length)

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.history.extend(ids.tolist())
        self.length = len(self.history)
        self.steps += 1
        logits = torch.zeros(self.vocab)
        logits[self.choose()] = 10.0
        return logits[None]

    def choose(self) -> int:
        written = self.text.bytes(self.history)
        if not self.reference.startswith(written) or len(written) == len(self.reference):
            return 5
        rest = self.reference[len(written) :]
        fits = [i for i, b in enumerate(self.text.table[: self.vocab]) if b and rest.startswith(b)]
        fits.sort(key=lambda i: len(self.text.table[i]))
        if self.steps % 7 == 0:
            return next(i for i, b in enumerate(self.text.table) if i > 3 and b and not rest.startswith(b))
        return fits[0] if self.steps % 3 == 0 else fits[-1]


def oracle_drafter(method: str, reference_ids: list[int]):
    pair = cross_pair()
    d_text, t_text = TokenText(draft_tokenizer()), TokenText(tiny_tokenizer())
    lm = OracleLM(d_text, t_text.bytes(reference_ids), len(draft_tokenizer()))
    sampler = Sampler(GREEDY, len(draft_tokenizer()))
    if method == "text":
        return TextDrafter(
            lm,
            d_text,
            t_text,
            sampler,
            None,
            draft_eos={draft_tokenizer().eos_token_id},
            target_eos=tiny_tokenizer().eos_token_id,
        )
    vmap = vocab_map(draft_tokenizer(), tiny_tokenizer())
    return IntersectionDrafter(lm, vmap, d_text, t_text, sampler, None, target_eos={pair.tokenizer.eos_token_id})


@pytest.mark.parametrize("method,least_accepted", [("text", 0.6), ("intersection", 0.45)])
def test_a_draft_that_knows_the_text_gets_most_target_tokens_accepted(method, least_accepted):
    """Straddling boundaries, half-character tokens (the emoji prompt), re-synced caches: the
    output is still the target's greedy output, and most of it came from accepted drafts, which
    needs the draft's text to land on the target's tokens."""
    target = tiny_model(0)
    t_text = TokenText(tiny_tokenizer())
    for prompt in PROMPTS:
        ids = encode(prompt)
        expected = plain_greedy(target, ids, 40)
        drafter = oracle_drafter(method, ids + expected)
        got, accepted, proposals = speculative(target, drafter, ids, 40, 4)
        assert got == expected, (method, prompt)
        assert accepted >= least_accepted * 40, (method, prompt, accepted)
        for proposal in proposals:
            # the alignment: each draft token's text, and the candidates its bytes became
            alignment = proposal.alignment
            assert all(a.text == drafter.side.d.text([a.id]) for a in alignment)
            covered = sorted({j for a in alignment for j in a.candidates})
            assert covered == list(range(len(proposal)))
            drafted = b"".join(drafter.side.d.bytes([a.id]) for a in alignment)
            if method == "text":
                assert drafted.startswith(t_text.bytes(proposal.tokens.tolist()))
            else:
                assert drafted == t_text.bytes(proposal.tokens.tolist())


@torch.inference_mode()
def test_the_draft_cache_follows_the_committed_text():
    """After every round the draft's own ids stand for exactly the target's committed text,
    and its cache holds a prefix of them (whatever the draft proposed)."""
    pair = cross_pair()
    ids = encode(PROMPTS[2])
    for method in ("text", "intersection"):
        drafter = make_cross_drafter(pair, GREEDY, None, method)
        lm = CachedLM(model_forward(pair.target), pair.target.config, torch.device("cpu"))
        context = torch.tensor(ids)
        lm.feed(context[:-1])
        drafter.begin(context)
        for _ in range(8):
            proposal = drafter.propose(context, 3, lambda c: True)
            logits = lm.feed(torch.cat([context[-1:], proposal.tokens]), keep=0)
            v = verify(proposal.tokens, logits, None, greedy=True)
            lm.crop(context.numel() + v.n_accepted)
            context = torch.cat([context, torch.tensor(v.new_tokens)])
            drafter.accepted(v.n_accepted)
            side = drafter.side
            side.sync(context.tolist(), getattr(drafter, "_direct", None))
            assert side.d.bytes(side.ids) == TokenText(tiny_tokenizer()).bytes(context.tolist())
            assert side.cached == side.ids[: len(side.cached)] and side.lm.length == len(side.cached)


# --- sampling -------------------------------------------------------------------------------


def test_text_drafts_are_point_masses_and_intersection_drafts_carry_their_q():
    pair = cross_pair()
    settings = GenerationSettings(temperature=1.0)
    vmap = vocab_map(draft_tokenizer(), tiny_tokenizer())
    shared_targets = set(vmap.draft_to_target[vmap.draft_to_target >= 0].tolist())
    for method in ("text", "intersection"):
        drafter = make_cross_drafter(pair, settings, torch.Generator().manual_seed(3), method)
        got, _, proposals = speculative(pair.target, drafter, encode(PROMPTS[0]), 30, 4, settings, seed=3)
        assert len(got) == 30 and any(len(p) for p in proposals)
        for p in proposals:
            if method == "text" or len(p) == 0:
                assert p.q is None
                continue
            assert p.q.shape == (len(p), pair.vocab_size)
            torch.testing.assert_close(p.q.sum(-1), torch.ones(len(p)))
            outside = [i for i in range(pair.vocab_size) if i not in shared_targets]
            assert torch.all(p.q[:, outside] == 0)
            assert torch.all(p.q[torch.arange(len(p)), p.tokens] > 0)


# Toy vocabularies that overlap in part: draft ids 0..5, target ids 0..6. Shared, by text:
# [UNK] 0->0, a 1->3, b 2->5, c 3->2; the draft's d, e and the target's x, y, z are unshared.
DRAFT_WORDS = ["[UNK]", "a", "b", "c", "d", "e"]
TARGET_WORDS = ["[UNK]", "x", "c", "a", "y", "b", "z"]
SHARED = {0: 0, 1: 3, 2: 5, 3: 2}
DRAFT_LOGITS = torch.tensor([0.2, 1.5, 0.3, 0.9, 1.8, 1.1])  # about half the mass on d and e
P = torch.tensor([0.05, 0.25, 0.1, 0.3, 0.0, 0.2, 0.1])  # over target ids
N = 20_000


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


class FixedLM:
    """A draft whose next-token logits are always DRAFT_LOGITS."""

    length = 0

    def reset(self) -> None:
        self.length = 0

    def crop(self, length: int) -> None:
        self.length = min(self.length, length)

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.length += ids.numel()
        return DRAFT_LOGITS[None].clone()


class NotRenormalised(IntersectionDrafter):
    """Samples from the restricted draft distribution but reports q before renormalising."""

    def _draft_distribution(self, logits):
        return torch.softmax(logits, -1) * self._allowed[: logits.shape[-1]]


class ShiftedQ(IntersectionDrafter):
    """Proposes through the right map but puts q on the next target id."""

    def _to_target(self, qd):
        return torch.roll(super()._to_target(qd), 1)


@torch.inference_mode()
def first_tokens(cls) -> tuple[torch.Tensor, float]:
    """Counts of the first token out of N one-position rounds, and the acceptance rate."""
    d_tok, t_tok = word_tokenizer(DRAFT_WORDS), word_tokenizer(TARGET_WORDS)
    vmap = vocab_map(d_tok, t_tok)
    g = torch.Generator().manual_seed(0)
    drafter = cls(
        FixedLM(),
        vmap,
        TokenText(d_tok),
        TokenText(t_tok),
        Sampler(GenerationSettings(temperature=1.0), 6),
        g,
        target_eos=set(),
    )
    context = torch.tensor([3, 5])
    drafter.begin(context)
    p = torch.stack([P, P]).double()
    counts, accepted = torch.zeros(7), 0
    for _ in range(N):
        proposal = drafter.propose(context, 1, lambda c: True)
        v = verify(proposal.tokens, p, proposal.q.double(), generator=g)
        counts[v.new_tokens[0]] += 1
        accepted += v.n_accepted
    return counts, accepted / N


def test_the_intersection_method_outputs_p_and_a_wrong_mapping_does_not():
    vmap = vocab_map(word_tokenizer(DRAFT_WORDS), word_tokenizer(TARGET_WORDS))
    assert {d: t for d, t in enumerate(vmap.draft_to_target.tolist()) if t >= 0} == SHARED
    # q written out by hand: the draft's softmax over its shared ids, renormalised, at their target ids
    shared = torch.tensor(list(SHARED))
    q = torch.zeros(7)
    q[torch.tensor(list(SHARED.values()))] = torch.softmax(DRAFT_LOGITS[shared], -1)
    overlap = float(torch.minimum(P, q).sum())
    counts, rate = first_tokens(IntersectionDrafter)
    assert_matches(counts, P, N)
    assert counts[1] > 0 and counts[6] > 0  # x and z, which the draft cannot propose, come from residuals
    assert abs(rate - overlap) <= SIGMAS * (overlap * (1 - overlap) / N) ** 0.5
    for wrong in (NotRenormalised, ShiftedQ):
        counts, _ = first_tokens(wrong)
        with pytest.raises(AssertionError):
            assert_matches(counts, P, N)


# --- choosing the drafter ---------------------------------------------------------------------


def test_make_cross_drafter_follows_the_pairs_default_and_refuses_unknown_methods():
    pair = cross_pair()
    assert isinstance(make_cross_drafter(pair, GREEDY), IntersectionDrafter)  # overlap 77%
    assert isinstance(make_cross_drafter(pair, GREEDY, method="text"), TextDrafter)
    with pytest.raises(UserError, match="vocab method must be one of text, intersection"):
        make_cross_drafter(pair, GREEDY, method="bytes")
    same = ModelPair(
        name="same",
        tokenizer=tiny_tokenizer(),
        target=tiny_model(0),
        draft=tiny_model(1),
        vocab_size=len(tiny_tokenizer()),
        device=torch.device("cpu"),
        dtype=torch.float32,
    )
    with pytest.raises(UserError, match="no draft with its own tokenizer"):
        make_cross_drafter(same, GREEDY)
