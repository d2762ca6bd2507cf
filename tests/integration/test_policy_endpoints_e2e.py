"""Policy servers over real sockets, driven by the official `openai` client as the agent does."""
from __future__ import annotations

import base64
import io
import json

import httpx
import openai
import pytest
from PIL import Image

from testkit.loopback import LoopbackServer
from vrag_rl.serving.policy_server.app import create_app
from vrag_rl.serving.policy_server.scripted import ScriptedBackend


def _data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def scripted_server():
    backend = ScriptedBackend({"alpha": ["a0 {question}", "a1"], "beta": ["b0", "b1", "b2"]}, default=["d0"])
    server = LoopbackServer(create_app(backend, "scripted", api_key="k")).start()
    yield server
    server.stop()


def _client(server, key="k"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def test_replay_by_turn_and_key(scripted_server):
    client = _client(scripted_server)
    alpha = [{"role": "user", "content": "Question: alpha?"}]
    first = client.chat.completions.create(model="scripted", messages=alpha)
    assert first.choices[0].message.content == "a0 alpha?" and first.usage.total_tokens > 0
    beta = [{"role": "user", "content": "beta"}, {"role": "assistant", "content": "b0"},
            {"role": "user", "content": "more"}]
    assert client.chat.completions.create(model="scripted", messages=beta).choices[0].message.content == "b1"
    other = [{"role": "user", "content": "gamma"}, {"role": "assistant", "content": "x"}] * 3
    assert client.chat.completions.create(model="scripted", messages=other).choices[0].message.content == "d0"
    assert [m.id for m in client.models.list().data] == ["scripted"]


def test_streaming_concatenates_to_the_reply(scripted_server):
    stream = _client(scripted_server).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "Question: alpha beta"}], stream=True)
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream]
    assert "".join(pieces) == "a0 alpha beta"


def test_stop_strings_and_max_tokens(scripted_server):
    client = _client(scripted_server)
    reply = client.chat.completions.create(model="s", messages=[{"role": "user", "content": "Question: alpha x"}],
                                           stop=["alpha"])
    assert reply.choices[0].message.content == "a0 " and reply.choices[0].finish_reason == "stop"
    reply = client.chat.completions.create(model="s", messages=[{"role": "user", "content": "Question: alpha x y"}],
                                           max_tokens=2)
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 2


@pytest.mark.parametrize("body, status, fragment", [
    ({"messages": [{"role": "user", "content": "x"}], "temperature": 3}, 422, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "n": 2}, 422, "n"),
    ({"messages": []}, 422, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://evil/x.png"}}]}]},
     400, "remote image URLs are not fetched"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url",
                                                  "image_url": {"url": "data:image/png;base64,!!!notbase64"}}]}]},
     400, "image"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
                    * 33}]}, 422, "at most 32"),
])
def test_bad_requests_get_4xx(tiny_policy_server, body, status, fragment):
    response = httpx.post(f"{tiny_policy_server.url}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == status, response.text
    assert fragment in response.text


def test_api_key(scripted_server):
    with pytest.raises(openai.AuthenticationError):
        _client(scripted_server, key="wrong").chat.completions.create(
            model="s", messages=[{"role": "user", "content": "x"}])
    assert httpx.get(f"{scripted_server.url}/health").status_code == 200


class _CountingApp:
    """ASGI wrapper counting the chat completions a server receives (what the agent really sent)."""

    def __init__(self, app):
        self.app = app
        self.chat_calls = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.chat_calls += 1
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def tiny_policy_server(tiny_qwen25vl_dir):
    from vrag_rl.serving.policy_server.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_qwen25vl_dir), device="cpu")
    counting = _CountingApp(create_app(backend, "tiny-qwen25vl", serialize=True))
    server = LoopbackServer(counting).start()
    server.counting = counting
    yield server
    server.stop()


def test_transformers_server_answers_a_chat_with_an_image(tiny_policy_server):
    """A real chat request with an image through the tiny Qwen2.5-VL (random weights: any text)."""
    client = openai.OpenAI(base_url=tiny_policy_server.url + "/v1", api_key="none", max_retries=0)
    image = Image.new("RGB", (320, 240), "white")
    messages = [
        {"role": "system", "content": "You answer questions about pages."},
        {"role": "user", "content": [{"type": "text", "text": "What is on this page?"},
                                     {"type": "image_url", "image_url": {"url": _data_url(image)}}]},
    ]
    first = client.chat.completions.create(model="tiny-qwen25vl", messages=messages, max_tokens=8, temperature=0)
    again = client.chat.completions.create(model="tiny-qwen25vl", messages=messages, max_tokens=8, temperature=0)
    assert isinstance(first.choices[0].message.content, str)
    assert first.choices[0].message.content == again.choices[0].message.content  # greedy is deterministic
    assert first.choices[0].finish_reason in ("stop", "length")
    assert 0 < first.usage.completion_tokens <= 8
    assert first.usage.prompt_tokens > 20  # the image's vision tokens are in the prompt
    sampled = client.chat.completions.create(model="tiny-qwen25vl", messages=messages, max_tokens=6,
                                             temperature=1.0, top_p=0.9, seed=3)
    assert sampled.usage.completion_tokens <= 6


def test_agent_against_the_transformers_policy_ends_cleanly(tiny_policy_server, text_search_server):
    """A random model writes garbage: the agent must still end with an answer or an explicit failure."""
    from vrag_rl import VRAG

    before = tiny_policy_server.counting.chat_calls
    result = VRAG(base_url=tiny_policy_server.url + "/v1", search_url=text_search_server.url, max_turns=2,
                  max_tokens=12).run("What is the revenue?")
    calls = tiny_policy_server.counting.chat_calls - before
    # 12 random tokens never form a well-formed <answer>: the episode cannot end "answered"; it ends at the
    # turn budget (2 turns + the forced-answer request) or earlier with an explicit failure and its reason
    assert result.status in ("forced_answer", "failed"), (result.status, result.answer)
    assert 1 <= calls <= 3 and result.turns == calls, (calls, result.turns)
    if result.status == "failed":
        assert result.error
    else:
        assert calls == 3 and isinstance(result.answer, str)
    assert result.events[-1].type == "finish"
    json.dumps(result.to_dict())


def test_transformers_backend_clear_error_for_missing_model(tmp_path):
    from vrag_rl.serving.policy_server.transformers_backend import TransformersBackend

    with pytest.raises(RuntimeError, match="could not load the policy model"):
        TransformersBackend(str(tmp_path / "no-such-model"))
