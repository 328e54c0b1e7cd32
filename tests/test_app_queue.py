"""One queue and each visitor's share, against `python app.py` launched for real on
127.0.0.1: no endpoint answers outside the queue, a visitor with a model request outstanding
is refused another in one line while another visitor is served, and a huge prompt is refused
at once."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
import uuid

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError, ValidationError

from app_server import launched_app, save_tiny_pair

pytestmark = pytest.mark.app

PROMPT = "for i in range(10):"
LIMIT = "the limit is 1 per visitor (SPECVIZ_MAX_RUNS_PER_VISITOR)"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    env = {
        "SPECVIZ_DEFAULT_PAIR": spec,
        "SPECVIZ_PRELOAD": "0",
        "SPECVIZ_MAX_RUNS_PER_VISITOR": "1",
        "SPECVIZ_MCP": "false",
    }
    with launched_app(env, "app-queue") as url:
        yield url, spec


def _post(url: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.parametrize("endpoint", ["generate", "generate_summary", "best_k", "status"])
def test_no_endpoint_answers_outside_the_queue(app, endpoint):
    url, spec = app
    status, text = _post(f"{url}gradio_api/run/{endpoint}", {"data": [PROMPT, spec]})
    assert status == 404 and "join the queue" in text


def test_the_mcp_server_is_off_when_told_false(app):
    url, _ = app
    status, _ = _post(f"{url}gradio_api/mcp/", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 404


def test_a_visitor_has_one_model_request_outstanding_and_another_visitor_is_served(app):
    url, spec = app
    first, second = Client(url, verbose=False), Client(url, verbose=False)
    running = first.submit(PROMPT, spec, api_name="/generate_summary", max_new_tokens=64)
    deadline = time.monotonic() + 30
    while running.status().code.name not in ("PROCESSING", "ITERATING", "FINISHED") and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(Exception) as refused:
        first.predict(PROMPT, spec, api_name="/generate_summary", max_new_tokens=4)
    assert "you have 1 model requests waiting or running; " + LIMIT in str(refused.value)
    other = second.submit(PROMPT, spec, api_name="/generate_summary", max_new_tokens=4)  # another session: admitted
    assert json.loads(running.result(timeout=300))["summary"]["new_tokens"] >= 1
    assert json.loads(other.result(timeout=300))["summary"]["new_tokens"] >= 1
    again = json.loads(first.predict(PROMPT, spec, api_name="/generate_summary", max_new_tokens=4))
    assert again["summary"]["new_tokens"] >= 1  # its run over, the visitor is served again


def test_a_huge_prompt_is_refused_at_once_and_the_app_keeps_serving(app):
    url, spec = app
    client = Client(url, verbose=False)
    big = "x" * 10_000_000
    started = time.monotonic()
    # refused as it asks to join the queue (app/visitors.py), before any run ahead of it
    with pytest.raises((AppError, ValidationError), match=r"the prompt is 10,000,000 characters; the limit is 100,000"):
        client.predict(big, spec, api_name="/generate_summary", max_new_tokens=4)
    assert time.monotonic() - started < 5  # sent, parsed and refused; the check alone: tests/test_public_page.py
    assert json.loads(client.predict(PROMPT, spec, api_name="/generate_summary", max_new_tokens=4))["text"] is not None


def test_a_request_over_the_size_limit_is_refused_before_its_body_is_read(app):
    url, _ = app
    host, port = url.split("//")[1].strip("/").split(":")
    announced = 100_000_000
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(
            b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: %d\r\n\r\n{"data": ["xxxx' % announced
        )  # the rest never sent
        reply = b""
        while not reply.endswith(b"}"):  # the headers and the body may come apart
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        reply = reply.decode()
    assert time.monotonic() - started < 1
    assert reply.startswith("HTTP/1.1 413")
    assert reply.endswith(
        '"the request is 100,000,000 bytes; the limit is 16,000,000 bytes (SPECVIZ_MAX_REQUEST_BYTES)"}'
    )


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair-public"))
    with launched_app(
        {"SPECVIZ_DEFAULT_PAIR": spec, "SPECVIZ_PRELOAD": "0", "SPECVIZ_PUBLIC": "1"}, "app-public"
    ) as url:
        yield Client(url, verbose=False), spec


def test_a_public_page_serves_its_pair_only_on_its_runtime_and_names_no_folder(public):
    client, spec = public
    for pair in ("qwen-7b", "Qwen/Qwen2.5-0.5B -> Qwen/Qwen2.5-1.5B", "/etc -> /etc"):
        with pytest.raises(AppError) as e:
            client.predict(PROMPT, pair, api_name="/generate_summary", max_new_tokens=4)
        # the operator's pair here is two folders: a public page names no server path
        assert str(e.value).endswith("this page loads only <path> -> <path> (SPECVIZ_PAIRS)")
    with pytest.raises(AppError, match=r"^runtime 'torch': this page runs its pairs on the runtime its operator chose"):
        client.submit(PROMPT, spec, api_name="/generate", runtime="torch", max_new_tokens=4).result()
    assert json.loads(client.predict(PROMPT, spec, api_name="/generate_summary", max_new_tokens=4))["text"] is not None
    status = json.loads(client.predict(spec, api_name="/status"))
    assert status["state"] == "ready" and status["cache"] == ""


def _by_fn_index(url: str, api_name: str, values: dict[str, object]) -> list[dict]:
    """Run the page's event `api_name` as the browser does: join the queue by fn_index with its
    inputs' values (the components' own, `values` by elem_id over them), read its messages."""
    config = json.loads(urllib.request.urlopen(url + "config", timeout=30).read())
    components = {c["id"]: c.get("props", {}) for c in config["components"]}
    dep = next(d for d in config["dependencies"] if d.get("api_name") == api_name)
    data = [values.get(components[i].get("elem_id"), components[i].get("value")) for i in dep["inputs"]]
    session = uuid.uuid4().hex
    status, text = _post(
        f"{url}gradio_api/queue/join",
        {"data": data, "fn_index": dep["id"], "session_hash": session, "event_data": None, "trigger_id": None},
    )
    if status == 422:  # refused at the queue's door: the answer is the refusal, as a finished event's would be
        (verdict,) = json.loads(text)["detail"]
        return [{"msg": "process_completed", "success": False, "output": {"error": verdict["message"]}}]
    assert status == 200, text
    messages = []
    with urllib.request.urlopen(f"{url}gradio_api/queue/data?session_hash={session}", timeout=300) as stream:
        for line in stream:
            if line.startswith(b"data:"):
                messages.append(json.loads(line[5:]))
                if messages[-1].get("msg") == "process_completed":
                    return messages
    return messages


def test_the_live_run_called_by_fn_index_runs_and_is_bounded_like_the_api(app):
    url, spec = app
    done = _by_fn_index(url, "run", {"prompt": PROMPT, "pair": spec, "max_new_tokens": 8})[-1]
    assert done["success"], done
    assert 'data-state="done"' in done["output"]["data"][0]  # the stream, finished
    refused = _by_fn_index(url, "run", {"prompt": "x" * 200_000, "pair": spec})[-1]
    assert not refused["success"]
    assert refused["output"]["error"] == (
        "the prompt is 200,000 characters; the limit is 100,000 characters (SPECVIZ_MAX_PROMPT_CHARS)"
    )
    bad = _by_fn_index(url, "run", {"prompt": PROMPT, "pair": spec, "k": 1000})[-1]["output"]["error"]
    assert "1000" in bad and "16" in bad and "\n" not in bad  # the slider's own check, or the setting's
