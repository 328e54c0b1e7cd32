"""Measurements on a loaded pair that go beyond one run: a temperature sweep (sweep.py) and
the cost of passes over several sequences at once, with the speedup they predict by batch
size (batching.py). They sit in the workshop, above the page: they drive the engine and the
models, the CLI prints what they return and the Labs tab's panel (panels.py) draws it.
"""
