"""specviz's web page. `python app.py` serves it at once on http://127.0.0.1:7860.

The default model pair starts loading in a background thread before the page is built (the
page shows its progress once it is up, and Run waits for it). Settings come from the environment, read
in one place: specviz/app/config.py (where to listen, the default pair, SPECVIZ_PUBLIC and what a public
page allows, the limits per run and per visitor, the queue, MCP); a bad value stops the launch in one line.
Every request goes through the one queue (`api_open=False`: no endpoint answers outside it).
"""

from __future__ import annotations

import logging

from specviz import limits
from specviz.app import runner, zero_gpu
from specviz.app.config import PageConfig
from specviz.errors import UserError
from specviz.settings import GenerationSettings
from specviz.events import MAX_TRACE_BYTES


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = PageConfig.from_env()
        limits.check_environment()
    except UserError as e:
        raise SystemExit(f"specviz: {e}") from None
    if config.preload:
        # Before gradio is imported and the page built (seconds), so the pair loads meanwhile.
        # What the load imports is imported here first: two threads importing one package at
        # once can meet each other's import locks.
        import specviz.engine.load  # noqa: F401
        from specviz.lm import timing

        # The files load beside the page's build; passes are timed once it is up (lm.timing.hold).
        timing.hold()
        # ZeroGPU takes the models that are on CUDA when the page launches, placed from the main
        # thread: there the pair loads first, here.
        state = runner.LOADER.request(config.default_pair, here=zero_gpu.ON_ZERO_GPU)
        if zero_gpu.ON_ZERO_GPU:
            zero_gpu.log_start(
                config.default_pair,
                state,
                lambda n: runner.run_wall_s(config, GenerationSettings(max_new_tokens=n), config.default_pair),
            )
    from starlette.middleware import Middleware

    from specviz.app import memory_trim
    from specviz.app.page import CSS_PATHS, build_page, queue
    from specviz.app.request_size import RequestSize
    from specviz.app.sessions import keep_sessions_short
    from specviz.app.strikes import Strikes, watch
    from specviz.lm.resident import settle_heap

    try:
        demo = build_page(config)
        queue(demo, config)
        strikes = Strikes.of(config)  # each visitor's refused requests, counted at the door and in the queue
        watch(demo, config, strikes)
        settle_heap()  # the page is built: its heap is kept out of the collector's walks
        demo.launch(
            server_name=config.host,
            server_port=config.port,
            css_paths=CSS_PATHS,
            prevent_thread_lock=True,
            footer_links=["api", "gradio"],
            max_file_size=MAX_TRACE_BYTES,
            state_session_capacity=config.max_sessions,
            mcp_server=config.mcp,
            app_kwargs={"middleware": [Middleware(RequestSize, config=config, strikes=strikes)]},
        )
        keep_sessions_short(demo)
        if config.memory_trim:
            memory_trim.start()
    finally:
        if config.preload:
            timing.release()
    demo.block_thread()


if __name__ == "__main__":
    main()
