"""What both drafting and verifying need, below both: a model with its KV cache
(`cached.CachedLM`), the sampler that turns logits into the distribution actually sampled
from (`sampling.Sampler`), and the prompt's ids and stop ids (`prompt`)."""
