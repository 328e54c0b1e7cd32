"""A run's output format: what the text must be, compiled to llguidance's grammar, and the
matcher that says per position which tokens the grammar allows.

- `formats.py`: the output format as the settings give it (free text, a JSON schema, a regular
  expression, a choice among strings, a grammar), bounded and compiled once; a finished
  output checked against it by an independent reader (jsonschema, Python's `re`).
- `matcher.py`: the run's grammar over the pair's tokenizer: the allowed tokens after the
  output so far and any path of drafted tokens past it, and the tokens it forces.
- `walk.py`: a round's proposal under the grammar: nodes it forbids pruned, the tokens it
  forces added, and the mask of each row of the target's pass.

A leaf: the settings check an output format here; the drafters reach the matcher through
their `Sampler`, the engine builds it. Nothing here imports torch or llguidance until a
format is compiled or a run starts.
"""
