"""The Gradio page's wiring; `app.py` at the repository root builds it and launches it.

Nothing here computes anything about speculative decoding: it calls models, engine, viz,
theory and lossless, and moves their results into components. What a tab is: `tab.py`;
what each module holds: docs/ARCHITECTURE.md, `specviz/app/`.
"""
