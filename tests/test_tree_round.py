"""Tree rounds end to end on tiny Qwen2 pairs: greedy tree decoding is the target's greedy
decoding token for token for every node budget and width tried, and a sampled round leaves
the target's cache as the chain of its accepted tokens would.
"""

import pytest
import torch

import specviz.engine as engine
from specviz.drafters.tree import TreeDrafter
from specviz.engine.tree_round import tree_round
from specviz.engine.verify import verify_tree
from specviz.lm.torch_runtime.lean import model_lm
from specviz.lm.prompt import encode_prompt, stop_ids
from specviz.lm.sampling import Sampler
from specviz.lm.tree import depths
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

GREEDY = GenerationSettings(temperature=0.0)
SAMPLED = GenerationSettings(temperature=0.9, top_k=30)


def always(_confidence: float) -> bool:
    return True


class TreeRun:
    """The tree decoding loop: draft a tree, verify it in one target pass, keep the path."""

    def __init__(self, pair, settings, prompt_ids, nodes, width, seed=0):
        self.pair = pair
        self.sampler = Sampler(settings, pair.vocab_size)
        self.greedy = settings.greedy
        self.target = model_lm(pair.target, pair.device)
        draft_lm = model_lm(pair.draft, pair.device)
        self.drafter = TreeDrafter(
            "tree", draft_lm, Sampler(settings, pair.vocab_size), stop_ids(pair), nodes=nodes, width=width
        )
        self.nodes = nodes
        self.generator = torch.Generator().manual_seed(seed)
        self.ids = torch.tensor(prompt_ids, dtype=torch.long)
        self.target.feed(self.ids[:-1])
        self.drafter.begin(self.ids)
        self.rounds = []

    def step(self, remaining):
        proposal = self.drafter.propose(self.ids, min(self.nodes, remaining - 1), always)
        r = tree_round(self.target, self.sampler, proposal, int(self.ids[-1]), self.generator, self.greedy)
        self.drafter.accepted_path(r.outcome.path)
        self.rounds.append(r)
        return r

    def decode(self, max_new, stop_at_eos=True):
        out = []
        eos = stop_ids(self.pair)
        while len(out) < max_new:
            r = self.step(max_new - len(out))
            new = r.outcome.new_tokens
            assert len(new) <= max_new - len(out)
            if stop_at_eos and any(t in eos for t in new):
                new = new[: next(j for j, t in enumerate(new) if t in eos) + 1]
                out += new
                break
            out += new
            self.ids = torch.cat([self.ids, torch.tensor(new)])
            assert self.target.length == self.ids.numel() - 1
        return out


def path_to(o, i: int) -> list[int]:
    """The tokens from the root down to node i."""
    out = []
    while i >= 0:
        out.insert(0, o.tokens[i])
        i = o.parents[i]
    return out


def argmax_decode(model, ids, n):
    """Greedy decoding with no cache at all: the definition the tree loop must meet."""
    ids = ids.clone()
    for _ in range(n):
        ids = torch.cat([ids, model(input_ids=ids[None]).logits[0, -1:].argmax(-1)])
    return ids[-n:].tolist()


@torch.inference_mode()
@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("nodes", [1, 2, 4, 8, 16])
def test_greedy_tree_decoding_is_plain_greedy_decoding(nodes, width):
    pair = tiny_pair("close")
    ids = pair.tokenizer("The quick brown fox", return_tensors="pt")["input_ids"][0]
    run = TreeRun(pair, GREEDY, ids.tolist(), nodes, width)
    got = run.decode(40, stop_at_eos=False)
    assert got == argmax_decode(pair.target, ids, 40)
    accepted = sum(len(r.outcome.path) for r in run.rounds)
    if nodes >= 4:
        assert accepted > 0  # the trees were really used (the close draft agrees often)


@torch.inference_mode()
@pytest.mark.parametrize("draft", ["close", "random"])
@pytest.mark.parametrize("prompt", ["def reverse(s):", "Speculative decoding: a small model"])
def test_greedy_tree_runs_equal_the_engines_plain_run(draft, prompt):
    pair = tiny_pair(draft)
    plain = engine.run(pair, prompt, GenerationSettings(mode="plain", max_new_tokens=30))
    prompt_ids = encode_prompt(pair, prompt, GenerationSettings(max_new_tokens=30))
    for nodes, width in [(6, 2), (12, 3)]:
        got = TreeRun(pair, GREEDY, prompt_ids, nodes, width).decode(30)
        assert got == plain.token_ids, (nodes, width)


@torch.inference_mode()
def test_a_greedy_round_reports_every_node():
    pair = tiny_pair("close")
    ids = pair.tokenizer("for i in range(10):", return_tensors="pt")["input_ids"][0]
    run = TreeRun(pair, GREEDY, ids.tolist(), 12, 3)
    r = run.step(50)
    o = r.outcome
    n = len(o.tokens)
    depth = depths(o.parents)
    assert n == 12 and len(o.parents) == len(o.p) == len(o.q) == len(o.decisions) == n
    assert [o.decisions[i] for i in o.path] == ["accepted"] * len(o.path)
    for i in range(n):
        assert depth[i] == (0 if o.parents[i] < 0 else depth[o.parents[i]] + 1)
        # Greedy: p is 1 where the node is the target's argmax after its parent, else 0.
        parent_row = pair.target(
            input_ids=torch.cat([ids, torch.tensor(path_to(o, i)[:-1], dtype=torch.long)])[None]
        ).logits[0, -1]
        assert o.p[i] == float(int(parent_row.argmax()) == o.tokens[i])
        if o.decisions[i] != "unchecked":  # checked: its parent is the root or on the path
            assert o.parents[i] in [-1] + o.path and o.p[i] == (1.0 if o.decisions[i] == "accepted" else 0.0)
    # What the target itself says after the path: the emitted token.
    full = torch.cat([ids, torch.tensor([o.tokens[i] for i in o.path], dtype=torch.long)])
    assert o.emitted == int(pair.target(input_ids=full[None]).logits[0, -1].argmax())
    assert r.target_ms > 0 and r.verify_ms >= r.target_ms


@torch.inference_mode()
def test_sampled_rounds_keep_the_target_cache_on_the_accepted_path():
    pair = tiny_pair("close")
    ids = pair.tokenizer("Speculative decoding: a small model", return_tensors="pt")["input_ids"][0]
    run = TreeRun(pair, SAMPLED, ids.tolist(), 10, 3, seed=3)
    branched = 0
    for _ in range(8):
        r = run.step(100)
        # The root row of this pass is the target's view of the whole context so far.
        ref = run.sampler.logits(pair.target(input_ids=run.ids[None]).logits[0, -1])
        assert torch.allclose(r.logits[0], ref, atol=1e-4, rtol=0)
        o = r.outcome
        assert r.dist is not None
        for i in range(len(o.tokens)):
            row = 0 if o.parents[i] < 0 else o.parents[i] + 1
            assert o.p[i] == pytest.approx(float(r.dist[row, o.tokens[i]]))
            assert o.q[i] > 0  # the tree drafter's q of its chosen token, recorded
            assert (o.u[i] is not None) == (o.decisions[i] != "unchecked")
        branched += any(d == "rejected" for d in o.decisions) and bool(o.path)
        run.ids = torch.cat([run.ids, torch.tensor(o.new_tokens)])
        assert run.target.length == run.ids.numel() - 1
    assert branched > 0  # some round accepted a node after rejecting a sibling or a cousin


@torch.inference_mode()
def test_first_token_of_a_sampled_tree_round_is_the_targets_on_a_tiny_model():
    # One real tree pass (tiny target, tree from the tiny draft, N = 10, B = 3), then the
    # rule N = 20,000 times on its distributions; the first token must follow the target's
    # processed distribution from a plain forward, within 5 standard errors per token
    # (tokens expected fewer than 5 times pooled into one bucket).
    n = 20_000
    pair = tiny_pair("close")
    ids = pair.tokenizer("def reverse(s):\n    return", return_tensors="pt")["input_ids"][0]
    run = TreeRun(pair, SAMPLED, ids.tolist(), 10, 3)
    proposal = run.drafter.propose(run.ids, 10, always)
    r = tree_round(run.target, run.sampler, proposal, int(run.ids[-1]), run.generator, False)
    parents = r.outcome.parents
    assert len([i for i in parents if i == -1]) >= 2  # the root really has siblings to choose from
    dist = r.dist.double()
    g = torch.Generator().manual_seed(5)
    counts = torch.zeros(dist.shape[-1], dtype=torch.long)
    for _ in range(n):
        counts[verify_tree(proposal.tokens, parents, dist, generator=g).new_tokens[0]] += 1
    p = run.sampler.distribution(pair.target(input_ids=ids[None]).logits[0, -1]).double()
    assert torch.all(counts[p == 0] == 0)
    common = p * n >= 5
    bp = torch.cat([p[common], p[~common].sum().view(1)])
    bc = torch.cat([counts[common], counts[~common].sum().view(1)]).double()
    assert torch.all((bc / n - bp).abs() <= 5 * torch.sqrt(bp * (1 - bp) / n) + 1e-6), (bc / n, bp)
