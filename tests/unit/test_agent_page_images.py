"""The page/view store and the OpenAI adapter's message conversion, checked on pixels and exact keys."""
from __future__ import annotations

import asyncio
import base64
import io

import pytest
from PIL import Image

from testkit.loopback import LoopbackServer
from testkit.malformed_openai import create_app
from vrag_rl.agent.images import draw_box, resize_for_model
from vrag_rl.agent.page_images import PageImageStore, open_rgb, view_key
from vrag_rl.agent.policies.openai_http import EncodedImageCache, OpenAIPolicy, encode_data_url
from vrag_rl.agent.policy import DEFAULT_MODEL, SamplingParams, image_part, message_images, text_part


def _page(width=1000, height=800) -> Image.Image:
    image = Image.new("RGB", (width, height), "white")
    image.paste((255, 0, 0), (600, 500, 700, 600))
    return image


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def test_view_key_names_page_region_and_size():
    assert view_key("p@/a.jpg", (1, 2, 3, 4), (28, 56)) == "p@/a.jpg|1,2,3,4|28x56"


def test_page_comes_from_a_local_file_else_from_fetch_and_is_decoded_once(tmp_path):
    path = tmp_path / "page.png"
    Image.new("L", (50, 40), 128).save(path)
    fetched = []

    async def fetch():
        fetched.append(1)
        small = Image.new("RGB", (100, 80), "white")
        small.paste((255, 0, 0), (60, 50, 70, 60))
        return _jpeg(small)

    async def main():
        store = PageImageStore()
        local = await store.page("a", str(path), fetch)
        again = await store.page("a", str(path), fetch)
        remote = await store.page("b", str(tmp_path / "missing.jpg"), fetch)
        remote_again = await store.page("b", None, fetch)
        return local, again, remote, remote_again

    local, again, remote, remote_again = asyncio.run(main())
    assert local.mode == "RGB" and local.size == (50, 40) and local.getpixel((0, 0)) == (128, 128, 128)
    assert again is local and remote_again is remote and len(fetched) == 1
    assert remote.size == (100, 80) and remote.getpixel((65, 55))[0] > 200 and remote.getpixel((65, 55))[1] < 60


def test_views_are_resized_by_the_model_rule_and_cached():
    store, page = PageImageStore(), _page()
    full, key = store.view("p", page, (0, 0, 1000, 800), 28, 256 * 28 * 28, 512 * 28 * 28)
    assert full.size == (700, 560) and key == "p|0,0,1000,800|700x560"
    again, _ = store.view("p", page, (0, 0, 1000, 800), 28, 256 * 28 * 28, 512 * 28 * 28)
    assert again is full
    crop, crop_key = store.view("p", page, (600, 500, 700, 600), 28, 256 * 28 * 28, 512 * 28 * 28)
    assert crop.size == (448, 448) and crop_key == "p|600,500,700,600|448x448"
    assert crop.getpixel((10, 10))[0] > 200 and crop.getpixel((10, 10))[1] < 60  # all red
    small, _ = store.view("p", page, (0, 0, 1000, 800), 28, 28 * 28, 100 * 28 * 28)
    # 812x1008 > 100·28² → scale by sqrt(800000/78400) = 3.19: floor(8.9)·28 x floor(11.2)·28
    assert small.size == (308, 224)  # a smaller budget is another view, not the cached one


def test_store_is_bounded_by_pixels():
    store = PageImageStore(max_page_pixels=100 * 80 * 2, max_view_pixels=10)
    pages = [Image.new("RGB", (100, 80), (i, i, i)) for i in range(3)]

    async def main():
        for i, page in enumerate(pages):
            async def fetch(page=page):
                return _jpeg(page)
            await store.page(f"k{i}", None, fetch)
        calls = []

        async def refetch():
            calls.append(1)
            return _jpeg(pages[0])
        await store.page("k0", None, refetch)  # evicted by the third page: fetched again
        await store.page("k2", None, refetch)  # still cached
        return calls

    assert asyncio.run(main()) == [1]
    view, _ = store.view("v", pages[0], (0, 0, 100, 80), 28, 28 * 28, 100 * 28 * 28)
    again, _ = store.view("v", pages[0], (0, 0, 100, 80), 28, 28 * 28, 100 * 28 * 28)
    assert again is not view  # larger than the view budget: never cached


def test_open_rgb_converts_once():
    buffer = io.BytesIO()
    Image.new("P", (4, 4)).save(buffer, format="PNG")
    image = open_rgb(io.BytesIO(buffer.getvalue()))
    assert image.mode == "RGB" and image.size == (4, 4)


def test_resize_for_model_and_draw_box():
    grey = Image.new("L", (560, 700), 10)
    resized = resize_for_model(grey, 28, 256 * 28 * 28, 512 * 28 * 28)
    assert resized.mode == "RGB" and resized.size == (560, 700)
    rgb = Image.new("RGB", (560, 700))
    assert resize_for_model(rgb, 28, 256 * 28 * 28, 512 * 28 * 28) is rgb  # already right: no copy
    boxed = draw_box(rgb, (10, 10, 50, 50))
    assert boxed is not rgb and boxed.getpixel((10, 30)) == (160, 32, 240) and boxed.getpixel((30, 30)) == (0, 0, 0)
    assert boxed.getpixel((14, 30)) == (160, 32, 240) and boxed.getpixel((15, 30)) == (0, 0, 0)  # 5 px wide
    assert rgb.getpixel((10, 30)) == (0, 0, 0)


def test_message_conversion_and_image_encoding():
    red = Image.new("RGB", (32, 32), (255, 0, 0))
    policy = OpenAIPolicy("http://127.0.0.1:9", model="m", image_cache=EncodedImageCache(jpeg_quality=80))
    messages = [{"role": "system", "content": "rules"},
                {"role": "user", "content": [text_part("look"), image_part(red, "img-0", "page|0,0,32,32|32x32")]}]
    out = policy.to_openai_messages(messages)
    assert out[0] == {"role": "system", "content": "rules"}
    assert out[1]["content"][0] == {"type": "text", "text": "look"}
    url = out[1]["content"][1]["image_url"]["url"]
    assert out[1]["content"][1]["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert decoded.size == (32, 32) and decoded.getpixel((16, 16))[0] > 240
    assert policy.to_openai_messages(messages)[1]["content"][1]["image_url"]["url"] is url
    assert policy.images.misses == 1 and policy.images.hits == 1 and policy.images.jpeg_quality == 80
    assert message_images(messages) == [red]
    grey = encode_data_url(Image.new("L", (8, 8), 200))
    assert Image.open(io.BytesIO(base64.b64decode(grey.split(",", 1)[1]))).mode == "RGB"
    assert encode_data_url(red, quality=10) != encode_data_url(red, quality=95)


@pytest.fixture(scope="module")
def endpoint():
    app = create_app()
    server = LoopbackServer(app).start()
    server.state = app.state.fuzz
    yield server
    server.stop()


def test_model_name_from_the_server_else_the_default(endpoint):
    async def main():
        listed = OpenAIPolicy(endpoint.url + "/fz/k.good_answer/v1")
        malformed = OpenAIPolicy(endpoint.url + "/fz/k.models_malformed/v1")
        given = OpenAIPolicy(endpoint.url + "/fz/k.good_answer/v1", model="mine")
        try:
            names = [await p.resolve_model() for p in (listed, malformed, given)]
            reply = await listed.complete([{"role": "user", "content": "[fuzz model] q"}],
                                          SamplingParams(max_tokens=9, stop=("</answer>",), seed=3,
                                                         extra_body={"top_k": 2}))
        finally:
            for p in (listed, malformed, given):
                await p.aclose()
        return names, reply

    names, reply = asyncio.run(main())
    assert names == ["fuzz-model", DEFAULT_MODEL, "mine"]
    assert reply.text == "<think>it says 7.4</think><answer>7.4</answer>" and reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens) == (10, 5)
    sent = [e for e in endpoint.state.log if e["episode"] == "[fuzz model]"][-1]
    assert sent["model"] == "fuzz-model" and sent["max_tokens"] == 9
    assert (sent["seed"], sent["stop"], sent["top_k"]) == (3, ["</answer>"], 2)  # seed and extras reach the server


def test_status_errors_carry_the_detail(endpoint):
    from vrag_rl.agent.policy import PolicyError

    async def main():
        policy = OpenAIPolicy(endpoint.url + "/nowhere/v1", model="m", max_retries=0)
        try:
            await policy.complete([{"role": "user", "content": "q"}], SamplingParams())
        finally:
            await policy.aclose()

    with pytest.raises(PolicyError, match=r"answered 404: Not Found$"):
        asyncio.run(main())

    async def failing(code: int):
        policy = OpenAIPolicy(endpoint.url + f"/status/{code}/v1", model="m", max_retries=0)
        try:
            await policy.complete([{"role": "user", "content": "q"}], SamplingParams())
        finally:
            await policy.aclose()

    for code in (400, 500):
        with pytest.raises(PolicyError) as caught:
            asyncio.run(failing(code))
        assert str(caught.value).endswith(f"/status/{code}/v1 answered {code}: model crashed")
