"""Which models there are and their files: presets (one bundled pair for offline use) and
custom pairs (`catalogue`), the files on disk and their cache (`files`), and how two
vocabularies line up (`alignment`). Loading a pair onto a runtime is `specviz.lm`'s
(`from specviz.lm import load_pair`).

See `catalogue/sources.py` for how custom pairs are written and `files/cache.py` for the
on-disk cache.
"""

from specviz.models.catalogue.presets import DEFAULT_PAIR, Preset, get_preset, list_presets

__all__ = ["DEFAULT_PAIR", "Preset", "get_preset", "list_presets"]
