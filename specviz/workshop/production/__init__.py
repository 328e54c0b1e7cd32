"""From the page to production: what a run found about a pair, written as the settings of the
engines people serve models with, and those engines' own speculative metrics read back.

    found.py    what a run found: the pair's models, the drafter, the draft length to use
    export.py   that, as a vLLM / SGLang / llama.cpp / transformers / llama-cpp-python command
    metrics.py  an engine's metrics (Prometheus text, a response's JSON) as counts
    judge.py    what the counts predict under a cost model, and a verdict
    *_cli.py    `python -m specviz export` and `python -m specviz metrics`
    panels.py   the page's export panel (Live run) and metrics section (Labs), and both as tools

In the workshop, above the page: it reads traces (events) and the catalogue of pairs
(models), and runs nothing.
"""
