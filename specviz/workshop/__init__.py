"""Beside the core: what uses a round without being on its path.

The bench, the labs, production exports and metrics, head training, the lossless lab and
the command line all drive the core (models -> lm -> drafters -> engine -> events -> viz)
and are driven by nothing in it; the page's Labs, Lossless and Production tabs show their
work.
"""
