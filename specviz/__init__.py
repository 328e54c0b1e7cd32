"""specviz: speculative decoding on real language models, made visible.

Data flows one way: models -> drafters -> engine -> events -> viz -> app.
"""

__version__ = "0.1.0"
