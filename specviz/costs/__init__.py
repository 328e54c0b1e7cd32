"""What a pair's passes cost here, measured once and cached, and what that decides.

The measurement of V(n) and D on a loaded pair with its disk cache (`measure.py`, into the
one cost type `cost_model.CostModel`), and which runtime `auto` runs a pair on from each
runtime's measured costs (`runtime_choice.py`). The engine, the page, the bench, the labs and
production import it; it imports only `lm`, `models` and the leaves.
"""
