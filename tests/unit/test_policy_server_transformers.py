"""The transformers backend serving the tiny random Qwen2.5-VL over a real socket, via the `openai` client.

Random weights write arbitrary text: these tests check plumbing (chat template, image tokens,
sampling switches, limits, token counts, determinism), not what the model says.
"""
from __future__ import annotations

import base64
import concurrent.futures
import io
from dataclasses import replace

import httpx
import openai
import pytest
from PIL import Image, ImageDraw

from testkit.loopback import LoopbackServer
from vrag_rl.serving.policy_server.app import create_app
from vrag_rl.serving.policy_server.protocol import ChatCompletionRequest


def _data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def _page() -> Image.Image:
    image = Image.new("RGB", (320, 240), "white")
    ImageDraw.Draw(image).text((20, 20), "Revenue 2021: 42 million", fill="black")
    return image


@pytest.fixture(scope="module")
def backend(tiny_qwen25vl_dir):
    from vrag_rl.serving.policy_server.transformers_backend import TransformersBackend

    return TransformersBackend(str(tiny_qwen25vl_dir), device="cpu")


@pytest.fixture(scope="module")
def server(backend):
    server = LoopbackServer(create_app(backend, "tiny-qwen25vl")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120) as c:
        yield c


MESSAGES = [
    {"role": "system", "content": "You answer questions about pages."},
    {"role": "user", "content": [{"type": "text", "text": "Question: What is the revenue in 2021?"},
                                 {"type": "image_url", "image_url": {"url": _data_url(_page())}}]},
]


def test_chat_with_an_image(client):
    first = client.chat.completions.create(model="tiny-qwen25vl", messages=MESSAGES, max_tokens=8, temperature=0)
    again = client.chat.completions.create(model="tiny-qwen25vl", messages=MESSAGES, max_tokens=8, temperature=0)
    text = first.choices[0].message.content
    assert isinstance(text, str) and first.choices[0].message.role == "assistant"
    assert first.choices[0].finish_reason in ("stop", "length")
    assert 0 < first.usage.completion_tokens <= 8
    assert first.usage.prompt_tokens > 20  # the image's vision tokens are in the prompt
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    assert again.choices[0].message.content == text  # greedy is deterministic
    assert [m.id for m in client.models.list().data] == ["tiny-qwen25vl"]


def test_max_tokens_sampling_seed_and_history(client):
    history = MESSAGES + [{"role": "assistant", "content": "<think>zoom</think><bbox>[0, 0, 100, 50]</bbox>"},
                          {"role": "user", "content": [{"type": "image_url",
                                                        "image_url": {"url": _data_url(_page().crop((0, 0, 100, 50)))}},
                                                       {"type": "text", "text": "Zoomed region."}]}]
    replies = [client.chat.completions.create(model="m", messages=history, max_tokens=3, temperature=1.0, top_p=0.9,
                                              seed=7) for _ in range(2)]
    for reply in replies:  # sampling can go on with two images in the conversation (no vision token sampled)
        assert reply.usage.completion_tokens <= 3
        assert reply.choices[0].finish_reason in ("stop", "length")
    assert replies[0].choices[0].message.content == replies[1].choices[0].message.content  # same seed, same text
    one = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=1, temperature=0)
    assert one.usage.completion_tokens == 1 and one.choices[0].finish_reason in ("stop", "length")


def test_vision_tokens_are_never_generated(backend):
    """Sampling from a random model would otherwise emit <|image_pad|> and break the next forward."""
    import torch

    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, "temperature": 2.0})
    inputs = backend.encode(request.messages)
    config = backend._generation_config(request.params(), 32)
    assert sorted(config.suppress_tokens) == sorted(backend.suppressed) and len(backend.suppressed) == 4
    for seed in range(3):
        torch.manual_seed(seed)
        with torch.inference_mode():
            output = backend.model.generate(**inputs, generation_config=config)
        new = set(output[0, inputs["input_ids"].shape[1]:].tolist())
        assert not new & set(backend.suppressed)
    assert backend.generate(request.messages, replace(request.params(), max_tokens=16, seed=0)).completion_tokens <= 16


def test_streaming_and_concurrent_requests(client):
    stream = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=6, temperature=0, stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    plain = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=6, temperature=0)
    assert streamed == plain.choices[0].message.content
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # queued one at a time, all answered
        texts = list(pool.map(lambda _: client.chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=6, temperature=0).choices[0].message.content, range(4)))
    assert texts == [plain.choices[0].message.content] * 4


def test_bad_image_is_a_400(server):
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(b"not a png").decode()}}]}]}
    response = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 400 and "image" in response.json()["detail"]


def test_missing_model_is_a_clear_error(tmp_path, monkeypatch):
    from vrag_rl.serving.policy_server.transformers_backend import TransformersBackend

    with pytest.raises(RuntimeError, match="could not load the policy model .*no such folder"):
        TransformersBackend(str(tmp_path / "no-such-model"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE=1"):
        TransformersBackend("nobody/no-such-model-xyz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RuntimeError, match="no config.json"):
        TransformersBackend(str(tmp_path / "empty"))
