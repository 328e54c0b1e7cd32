"""Beside the core: what uses a round without being on its path.

The bench, the labs, production exports and metrics, head training, the lossless lab and
the command line all drive the core (models -> lm -> drafters -> engine -> events -> viz)
and are driven by nothing in it. What the page shows of them (the Lossless tab, the Labs
tab's labs that run the pair and production metrics, the Live run tab's export, their tools
for programs) lives here beside the code it shows, above the page: the page names those
parts in `app/parts.py` and imports nothing of the workshop.
"""
