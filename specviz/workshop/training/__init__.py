"""Training a draft head (`drafters.head_model`) on the target's own hidden states over local
text: the corpus (`corpus.py`), the states (`states.py`), the training (`train.py`) and
`python -m specviz train-head` (`cli.py`)."""
