"""V(n) and D on a GPU without the bundled weights: random-weight models built from the
bundled pair's configs (assets/model_configs), timed by the cost model's own code
(`costs.measure`, as every load times a pair), in bf16 on the torch runtime, with
transformers' own greedy `generate` on the same model object for a per-token reference.

Random weights change no pass cost (the same shapes, the same kernels), but they make any
acceptance meaningless, so no speedup is reported: only the costs, labelled as
random-weight timings. Prints one JSON report.

    python scripts/gpu_random_costs.py [--device cuda] [--sizes 1,2,4,8,17] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout, not an install

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

from specviz.costs import measure  # noqa: E402
from specviz.lm import timing  # noqa: E402
from specviz.lm.runtime import open_lm  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "assets" / "model_configs"
PAIR = {"target": "qwen2.5-coder-1.5b-instruct", "draft": "qwen2.5-coder-0.5b-instruct"}
GENERATE_TOKENS = 64


def random_model(name: str, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    config = AutoConfig.for_model(**json.loads((CONFIGS / f"{name}.json").read_text()))
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval().requires_grad_(False)


def hf_generate_ms_per_token(model: torch.nn.Module, device: torch.device) -> float:
    """transformers' greedy generate, GENERATE_TOKENS forced new tokens after 32 prompt ones."""
    ids = torch.randint(0, model.config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1)).to(device)
    kw = dict(max_new_tokens=GENERATE_TOKENS, min_new_tokens=GENERATE_TOKENS, do_sample=False, pad_token_id=0)
    model.generate(ids, **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    model.generate(ids, **kw)
    _sync(device)
    return 1000 * (time.perf_counter() - t0) / GENERATE_TOKENS


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--sizes", default=",".join(str(n) for n in measure.MEASURED_SIZES))
    ap.add_argument("--repeats", type=int, default=timing.REPEATS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict = {
        "what": "random-weight timings: the bundled pair's configs with random weights (no acceptance, no speedup)",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "dtype": args.dtype,
        "torch": torch.__version__,
        "runtime": "torch",
        "sizes": sizes,
        "models": {},
    }
    models = {}
    for role, name in PAIR.items():
        t0 = time.perf_counter()
        model = models[role] = random_model(name, device, dtype)
        lm = open_lm(model, device)
        report["models"][role] = {
            "config": name,
            "parameters": sum(p.numel() for p in model.parameters()),
            "loop": type(lm).__name__,
            "build_s": round(time.perf_counter() - t0, 1),
        }
    vocab = models["target"].config.vocab_size
    verify = timing.target_pass_ms(models["target"], device, vocab, sizes, repeats=args.repeats)
    draft = timing.drafted_token_ms(models["draft"], device, vocab, repeats=args.repeats)
    report["V_ms"] = {str(n): round(v, 2) for n, v in verify.items()}
    report["V_over_V1"] = {str(n): round(v / verify[sizes[0]], 3) for n, v in verify.items()}
    report["D_ms"] = round(draft, 2)
    report["D_over_T"] = round(draft / verify[sizes[0]], 3)
    report["hf_generate_ms_per_token"] = {
        role: round(hf_generate_ms_per_token(m, device), 2) for role, m in models.items()
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
