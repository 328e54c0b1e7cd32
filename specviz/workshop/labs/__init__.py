"""Measurements on a loaded pair that go beyond one run: a temperature sweep (sweep.py) and
the cost of passes over several sequences at once, with the speedup they predict by batch
size (batching.py). They sit at the top beside bench and app: they drive the engine and the
models, and the page's labs tab and the CLI draw what they return.
"""
