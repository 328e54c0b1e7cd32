"""Generation settings shared by the CLI, the app and the bench, with validation.

Every limit a user can hit lives here, so the CLI and the page refuse bad input with the
same words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from specviz.errors import UserError

MAX_K = 16
MAX_NEW_TOKENS_CAP = 1024
DRAFTERS = ("model", "lookup", "early-exit")
MODES = ("speculative", "plain")


class SettingsError(UserError):
    """Input a user can fix: the message says what is wrong and what is allowed."""


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 disables top-k
    top_p: float = 1.0  # 1.0 disables top-p
    max_new_tokens: int = 128
    seed: int = 0
    k: int = 4  # draft length (the maximum when adaptive)
    adaptive: bool = False
    drafter: Literal["model", "lookup", "early-exit"] = "model"
    mode: Literal["speculative", "plain"] = "speculative"
    raw: bool = False  # send the prompt as-is instead of through the chat template
    early_exit_layers: int = 0  # layers of the target used by the early-exit drafter (0: a quarter)
    adaptive_threshold: float = 0.4  # adaptive: stop a round's drafting below this draft confidence

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validated(self) -> "GenerationSettings":
        """Return self, or raise SettingsError naming the first bad value."""
        _check(isinstance(self.k, int) and 1 <= self.k <= MAX_K, f"k must be a whole number from 1 to {MAX_K} (got {self.k!r})")
        _check(_num(self.temperature) and 0 <= self.temperature <= 2, f"temperature must be between 0 and 2 (got {self.temperature!r})")
        _check(_num(self.top_p) and 0 < self.top_p <= 1, f"top-p must be above 0 and at most 1 (got {self.top_p!r})")
        _check(isinstance(self.top_k, int) and self.top_k >= 0, f"top-k must be a whole number, 0 or more (got {self.top_k!r})")
        _check(
            isinstance(self.max_new_tokens, int) and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_CAP,
            f"max new tokens must be a whole number from 1 to {MAX_NEW_TOKENS_CAP} (got {self.max_new_tokens!r})",
        )
        _check(isinstance(self.seed, int) and 0 <= self.seed < 2**63, f"seed must be a whole number, 0 or more (got {self.seed!r})")
        _check(self.drafter in DRAFTERS, f"drafter must be one of {', '.join(DRAFTERS)} (got {self.drafter!r})")
        _check(self.mode in MODES, f"mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        _check(isinstance(self.early_exit_layers, int) and self.early_exit_layers >= 0, "early-exit layers must be 0 or more")
        _check(
            _num(self.adaptive_threshold) and 0 <= self.adaptive_threshold <= 1,
            f"adaptive threshold must be between 0 and 1 (got {self.adaptive_threshold!r})",
        )
        return self


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SettingsError(message)
