"""The Gradio page's wiring: loading pairs in the background, runs and their Stop, the tabs.

`app.py` at the repository root builds the page from these pieces and launches it. Nothing
here computes anything about speculative decoding: it calls models, engine, viz, theory
and lossless, and moves their results into components.
"""
