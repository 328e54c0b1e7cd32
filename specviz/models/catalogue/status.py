"""What each preset needs and what is already here, without loading anything."""

from __future__ import annotations

from specviz.models.files import cache

from specviz.models.catalogue import hub
from specviz.models.files.bundled import parts_installed
from specviz.models.files.cache import gguf_path
from specviz.models.files.convert import bundled_folder
from specviz.models.memory import GB
from specviz.models.catalogue.presets import DEFAULT_PAIR, ModelSource, Preset, WheelGGUF, list_presets


def model_status(source: ModelSource) -> dict:
    out = {"label": source.label, "params": source.params, "float32_gb": round(source.params * 4 / GB, 2)}
    if source.bundled is not None:
        g = source.bundled
        converted, installed = cache.folder_is_valid(bundled_folder(g)), parts_installed(g)
        out.update(
            bundled=g.origin,
            file=g.name,
            file_bytes=g.size,
            quant=g.quant,
            parts_installed=installed,
            cache="converted" if converted else "assembled" if gguf_path(g).is_file() else "empty",
            offline=converted or installed,
        )
        if isinstance(g, WheelGGUF):
            out["wheel"] = True  # the file comes from one wheel fetched from PyPI, not part packages
    if source.hub_id is not None:
        out.update(hub_id=source.hub_id, hub_cached=hub.cached_snapshot(source.hub_id) is not None)
        out["offline"] = out.get("offline", False) or out["hub_cached"]
    return out


def preset_status(preset: Preset) -> dict:
    models = {role: model_status(m) for role, m in (("draft", preset.draft), ("target", preset.target)) if m}
    offline = all(m["offline"] for m in models.values())
    pypi_once = not offline and all(
        m["offline"] or (m.get("wheel") and not m["parts_installed"]) for m in models.values()
    )
    return {
        "name": preset.name,
        "default": preset.name == DEFAULT_PAIR,
        "description": preset.description,
        "available": "offline" if offline else "needs PyPI once (--prepare)" if pypi_once else "needs the Hub",
        **models,
    }


def all_status() -> list[dict]:
    return [preset_status(p) for p in list_presets()]
