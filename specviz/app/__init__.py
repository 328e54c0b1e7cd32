"""The Gradio page's wiring; `app.py` at the repository root builds it and launches it.

Nothing here computes anything about speculative decoding: it calls models, engine, viz,
theory and lossless, and moves their results into components.

    config.py        what the page is launched with (environment variables), public or not
    loading.py       model pairs load in background threads; the page reads their progress
    stopping.py      a Stop flag per browser session
    runner.py        a request meets the models: wait for the pair, iterate the engine
    shown_errors.py  a user's mistake becomes a message in the page, never a traceback
    visitors.py      each visitor's share of the models, checked as a request joins the queue
    request_size.py  a request's body bounded before the server reads it
    page.py          the header, the six tabs and the events between them; the API endpoint
    live.py, inspector.py, compare.py, theory_tab.py, lossless_tab.py, traces.py
                     one tab each: its layout and its handlers
"""
