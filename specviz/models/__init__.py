"""Model pairs: presets (one bundled for offline use), custom pairs, loading and caching.

    from specviz.models import load_pair
    pair = load_pair("qwen-coder")            # draft + target, cached in this process
    target_only = load_pair("qwen-coder", with_draft=False)

See `sources.py` for how custom pairs are written and `cache.py` for the on-disk cache.
"""

from specviz.models.loader import clear_loaded, load_pair, loaded_bytes, prepare
from specviz.models.pair import ModelPair
from specviz.models.presets import DEFAULT_PAIR, Preset, get_preset, list_presets

__all__ = [
    "DEFAULT_PAIR",
    "ModelPair",
    "Preset",
    "clear_loaded",
    "get_preset",
    "list_presets",
    "load_pair",
    "loaded_bytes",
    "prepare",
]
