"""The cost-aware policy against the best fixed draft length, on simulated costs.

scripts/policy_table.py runs the real policy on a simulated clock (V(n) as measured on the
bundled pair, D at 0.05, 0.1 and 0.3 of T, each draft accepted with probability alpha and
reported with confidence alpha). With alpha the same for every token, the best a policy can do
is the best fixed k, which `theory.best_k_with_cost` gives in closed form. No speed of this
machine is asserted: costs are simulated.

Sample size: 3000 rounds per cell (about 3000-30000 tokens); the run-to-run spread of the
simulated speedup at one seed is under 1 %, so 0.95 of the best leaves room for the policy's
learning (its first rounds start from a prior) and catches a rule that drafts too long, too
short, or stops drafting when it pays: a policy that goes plain on its point estimate of alpha
alone stays plain after a run of unlucky rounds, 66 % of rounds at D/T 0.3 and alpha 0.5
(0.92 of the best).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "policy_table.py"
spec = importlib.util.spec_from_file_location("policy_table", SCRIPT)
policy_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy_table)

ROUNDS = 3000


@pytest.mark.parametrize("d_over_t", policy_table.RATIOS)
@pytest.mark.parametrize("alpha", policy_table.ALPHAS)
def test_the_policy_gets_within_5_percent_of_the_best_fixed_k(d_over_t, alpha):
    row = policy_table.simulate(policy_table.MEASURED_V, d_over_t, alpha, ROUNDS)
    assert row["speedup"] >= 0.95 * row["best_fixed_speedup"], row


def test_dearer_drafts_make_shorter_rounds_and_a_useless_draft_decodes_plainly():
    alpha = 0.7
    ks = [policy_table.simulate(policy_table.MEASURED_V, r, alpha, ROUNDS)["mean_k"] for r in policy_table.RATIOS]
    assert ks[0] > ks[1] > ks[2] > 1.0
    useless = policy_table.simulate(policy_table.MEASURED_V, 0.3, 0.05, ROUNDS)
    assert useless["best_fixed_k"] == 0
    assert useless["plain_rounds"] > 0.9
