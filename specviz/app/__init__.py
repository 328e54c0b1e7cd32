"""The Gradio page's wiring; `app.py` at the repository root builds it and launches it.

Nothing here computes anything about speculative decoding: it calls models, engine, viz and
theory, and moves their results into components. What a tab and a panel are: `tab.py`; what
the page is made of, the workshop's tabs, panels and tools included, by name: `parts.py`;
what each module holds: docs/ARCHITECTURE.md, `specviz/app/`.
"""
