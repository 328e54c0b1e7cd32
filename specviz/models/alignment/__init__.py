"""A draft and a target with different tokenizers lined up: the vocabulary check and the map between the two vocabularies."""
