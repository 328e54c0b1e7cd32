"""The torch runtime: transformers' modules run through specviz's own loops, with the CPU speed-ups."""
