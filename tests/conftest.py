"""Tests marked `browser` need Playwright and chromium. Where either is missing they are
skipped on a developer's machine, but fail in CI (the environment variable CI set, as
.ci/run is run), so that a CI without a browser cannot pass without running them.

The tests run on a cache folder of their own (`SPECVIZ_CACHE`, unless already set): what
they measure for their tiny pairs (pass costs, precision choices) stays out of the user's
cache, while the user's models and earlier measurements are still found there: the model
folders are linked, the measurements copied."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Files of the full suite left out of the fast tier (README.md, "Tests"), each 10 s or more here:
# command-line runs in subprocesses, Monte Carlo over trees and copy spans, model loads.
SLOW = {
    "test_robustness.py",
    "test_copy_span.py",
    "test_models_loader.py",
    "test_verify_tree.py",
    "test_resident.py",
    "test_browser_gate.py",
    "test_head.py",
}
# Tests of the fast tier's files left out of it too, each about 3 s or more here (Monte Carlo
# checks of a rule over thousands of samples, child processes, a toy setting's whole round trip):
# "file::test", a parametrized test's every case.
SLOW_TESTS = {
    "test_grammar_engine.py::test_the_first_two_tokens_follow_the_masked_target_when_both_are_masked",
    "test_grammar_engine.py::test_masking_only_p_keeps_the_distribution_but_proposes_forbidden_tokens",
    "test_grammar_engine.py::test_masking_only_q_breaks_the_distribution",
    "test_cross_vocab.py::test_the_intersection_method_outputs_p_and_a_wrong_mapping_does_not",
    "test_deploy.py::test_the_functions_that_run_the_models_and_only_they_are_passed_to_spaces_gpu",
    "test_settings_declared_once.py::test_a_toy_setting_added_in_settings_py_alone_reaches_the_cli_the_api_and_the_page",
    "test_runtime_prepare.py::test_a_child_process_loads_times_and_records_the_runtime",
    "test_draft_free.py::test_sampled_output_is_distributed_as_the_target",
    "test_draft_free.py::test_not_removing_a_rejected_candidate_is_caught",
    "test_policy_table.py::test_dearer_drafts_make_shorter_rounds_and_a_useless_draft_decodes_plainly",
    "test_policy_table.py::test_the_policy_gets_within_5_percent_of_the_best_fixed_k",
    "test_device_map.py::test_a_target_split_between_cpu_and_disk_decodes_exactly_as_plain",
    "test_labs_tab.py::test_the_handlers_run_on_the_tiny_pair",
    "test_labs_tab.py::test_on_zero_gpu_the_labs_pass_only_plain_values_to_the_gpu_functions",
}
SHARED = (
    "models",
    "gguf",
    "wheels",
    "locks",
    "tokenizers",
    "llama.cpp-tools",
)  # linked: built once, reused by every run
MEASURED = ("cost-models", "precision", "runtime-choice")  # copied: tests add their own entries


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("SPECVIZ_CACHE") or hasattr(config, "workerinput"):
        return
    from specviz.models.files.cache import cache_root

    real = cache_root()
    mine = Path(tempfile.mkdtemp(prefix="specviz-test-cache-"))
    for name in SHARED:
        (real / name).mkdir(parents=True, exist_ok=True)
        (mine / name).symlink_to(real / name, target_is_directory=True)
    for name in MEASURED:
        if (real / name).is_dir():
            shutil.copytree(real / name, mine / name)
    os.environ["SPECVIZ_CACHE"] = str(mine)
    config.add_cleanup(lambda: shutil.rmtree(mine, ignore_errors=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW or f"{item.path.name}::{item.originalname}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Every module the tests import (torch, transformers, gradio, specviz: most of the heap) is
    # loaded by now and lives to the end. Out of the cycle collector's sight, a gc.collect()
    # (`clear_loaded` runs one before and after many tests) walks only what the tests made since:
    # late in a full run it had walked millions of objects, over a second a test.
    gc.freeze()


@pytest.fixture(autouse=True)
def heap_not_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's load settles its heap (`resident.settle_heap`), and every unload after it walks
    the whole heap to free the unloaded pair's cycles; here the heap is frozen once, above, and a
    load in one test must not make every later unload (before and after many tests) walk it all."""
    from specviz.lm import resident

    monkeypatch.setattr(resident, "_settled", False)


@pytest.fixture(autouse=True)
def no_check_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny model's pass takes a fraction of a millisecond, so the load check of its cached
    costs is often off by more than its tolerance and pauses (costs.measure.CHECK_PAUSE_S)
    before timing again, for a busy moment a real machine would have: here it only waits."""
    from specviz.costs import measure

    monkeypatch.setattr(measure, "CHECK_PAUSE_S", 0.0)


def in_ci(env=os.environ) -> bool:
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser") is None:
        return
    from app_server import browser_missing

    missing = browser_missing()
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"browser test cannot run in CI: {missing}", pytrace=False)
    pytest.skip(f"{missing} (in CI, with CI set, this fails instead)")


# What several test files share, started by the first test that asks for it and stopped after
# the last that uses it (an idle page still polls its queue); the browser, as soon as the next
# test does not use it: Playwright's loop keeps that test from calling asyncio.run.
_shared: dict[str, tuple[object, contextlib.ExitStack]] = {}
_UNTIL_NEXT = {"browser"}


def _shared_value(name: str, start) -> object:
    if name not in _shared:
        stack = contextlib.ExitStack()
        _shared[name] = (start(stack), stack)
    return _shared[name][0]


@pytest.fixture
def browser():
    """Headless chromium (`app_server.chromium`); the pages a test opened are closed after it."""
    from app_server import chromium

    b = _shared_value("browser", lambda stack: stack.enter_context(chromium()))
    yield b
    for context in b.contexts:
        context.close()


@pytest.fixture
def tiny_url(tmp_path_factory):
    """app.py on the tiny pair (one thread, nothing loaded until a run asks): the page the
    browser tests share. Each page they open is a session of its own."""
    from app_server import launched_app, save_tiny_pair

    def start(stack):
        spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair-page"))
        # One thread, like the in-process tiny-model tests: greedy texts (and test_browser's LONG_PROMPT) match theirs.
        env = {"SPECVIZ_DEFAULT_PAIR": spec, "SPECVIZ_PRELOAD": "0", "OMP_NUM_THREADS": "1"}
        return stack.enter_context(launched_app(env, "app-tiny-page"))

    return _shared_value("tiny_url", start)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if not _shared:
        return
    items = item.session.items
    later = items[items.index(item) + 1 :] if nextitem is not None else []
    for name in list(_shared):
        users = later[:1] if name in _UNTIL_NEXT else later
        if not any(name in getattr(i, "fixturenames", ()) for i in users):
            _shared.pop(name)[1].close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _shared:
        _shared.popitem()[1][1].close()
