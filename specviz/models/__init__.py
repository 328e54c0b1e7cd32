"""Model pairs: presets (one bundled for offline use), custom pairs, loading and caching.

    from specviz.models import load_pair
    pair = load_pair("qwen-coder")            # draft + target, cached in this process
    target_only = load_pair("qwen-coder", with_draft=False)

See `sources.py` for how custom pairs are written and `cache.py` for the on-disk cache.
The loading functions are imported on first use, so that reading the presets (the app's
page, `python -m specviz models`) does not wait for torch.
"""

from specviz.models.catalogue.presets import DEFAULT_PAIR, Preset, get_preset, list_presets

_LAZY = {
    "load_pair": "specviz.models.loading.loader",
    "prepare": "specviz.models.loading.loader",
    "clear_loaded": "specviz.models.loading.loader",
    "loaded_bytes": "specviz.models.loading.loader",
    "ModelPair": "specviz.models.loading.pair",
}

__all__ = ["DEFAULT_PAIR", "Preset", "get_preset", "list_presets", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'specviz.models' has no attribute {name!r}")
