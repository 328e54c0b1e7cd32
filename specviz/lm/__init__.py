"""The model interface and its runtimes: what drafting and verifying ask of a model
(`runtime.LM`), the two runtimes that implement it (`torch_runtime`, `llamacpp_runtime`),
loading a pair on one of them (`loader.load_pair`, each runtime's loader beside its models), timing their passes (`timing`), the
sampler that turns logits into the distribution actually sampled from (`sampling.Sampler`),
and the prompt's ids and stop ids (`prompt`).

    from specviz.lm import load_pair
    pair = load_pair("qwen-coder")            # draft + target, cached in this process
    target_only = load_pair("qwen-coder", with_draft=False)

The loader is imported on first use, so that reading this package does not wait for torch.
"""

from specviz.lazy import lazy_exports

_LAZY = {
    "load_pair": "specviz.lm.loader",
    "prepare": "specviz.lm.torch_runtime.loader",
    "clear_loaded": "specviz.lm.torch_runtime.loader",
    "loaded_bytes": "specviz.lm.torch_runtime.loader",
    "ModelPair": "specviz.lm.pair",
}

__all__ = list(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
