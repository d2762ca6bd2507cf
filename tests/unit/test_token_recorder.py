"""Token recorder + in-process generate: the trajectory a trainer consumes is the conversation the model saw.

- recorded ids == the processor's tokenisation of the whole conversation (verl's sanity check);
- mask 1 covers exactly the model's sampled tokens, logprobs are 0 elsewhere;
- the training forward gets the same pixels the model saw while generating (pixel values present,
  image-token count == the images of the trajectory) — no blind policy.
"""
from __future__ import annotations

import asyncio

import pytest
import torch
from PIL import Image

from vrag_rl.agent.policies.local_transformers import LocalTransformersGenerate, expected_image_tokens
from vrag_rl.agent.policies.token_recorder import GenerateOutput, TokenRecordingPolicy, _template_form
from vrag_rl.agent.policy import PolicyError, SamplingParams, image_part, text_part
from vrag_rl.training.rollout.trajectory import Trajectory, model_inputs
from vrag_rl.vrag.result import EpisodeResult

REPLIES = [
    "<think>I should search for the revenue table.</think><search>annual report revenue</search>",
    "<think>zoom</think><bbox>[10, 20, 200, 120]</bbox>",
    "<think>The quick answer.</think><answer>42 million</answer>",
]


@pytest.fixture(scope="module")
def tiny(tiny_qwen25vl_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen25vl_dir).eval()
    return model, AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


class ScriptedGenerate:
    """Emits the canonical tokenisation of fixed replies (+ <|im_end|>) and remembers what it was given."""

    def __init__(self, tokenizer, replies, end=True):
        self.tokenizer, self.replies, self.end = tokenizer, list(replies), end
        self.calls: list[tuple[list[int], int]] = []

    async def __call__(self, prompt_ids, sampling, images):
        self.calls.append((list(prompt_ids), len(images)))
        ids = self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"]
        if self.end:
            ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        return GenerateOutput(ids, [-0.5] * len(ids), "stop" if self.end else "length")


def _page(color: str, size=(112, 84)) -> Image.Image:
    return Image.new("RGB", size, color)


async def _drive(recorder, images):
    """Drive the recorder as the agent loop does: append the reply, then the observation."""
    messages = [{"role": "system", "content": "Answer questions."},
                {"role": "user", "content": "Question: What is the revenue?"}]
    observations = [[text_part("Search result: page p_1."), image_part(images[0], "img-0", "k0")],
                    [text_part("Zoomed region."), image_part(images[1], "img-1", "k1")]]
    for turn in range(3):
        reply = await recorder.complete(messages, SamplingParams(temperature=1.0, max_tokens=64, seed=3))
        messages.append({"role": "assistant", "content": reply.text})
        if turn < 2:
            messages.append({"role": "user", "content": observations[turn]})
    return messages


def test_recorded_ids_equal_the_whole_conversation(tiny):
    _model, processor = tiny
    tok = processor.tokenizer
    generate = ScriptedGenerate(tok, REPLIES)
    recorder = TokenRecordingPolicy(processor, generate)
    images = [_page("white"), _page("gray", (56, 84))]
    messages = asyncio.run(_drive(recorder, images))

    text = processor.apply_chat_template(_template_form(messages), tokenize=False)
    whole = processor(text=[text], images=images)["input_ids"][0]
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert list(whole[-len(newline):]) == newline  # the template's "\n" after the last <|im_end|>
    assert recorder.prompt_ids + recorder.response_ids == list(whole[: -len(newline)])
    assert recorder.canonical_mismatch() == []

    # mask 1 == exactly the model's tokens, turn by turn; logprobs kept there, 0 elsewhere
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert len(recorder.response_mask) == len(recorder.response_ids) == len(recorder.response_logprobs)
    assert len(recorder.turn_spans) == 3
    for (start, end), reply in zip(recorder.turn_spans, REPLIES):
        assert recorder.response_ids[start:end] == tok(reply, add_special_tokens=False)["input_ids"] + [im_end]
    model_positions = {i for s, e in recorder.turn_spans for i in range(s, e)}
    assert {i for i, m in enumerate(recorder.response_mask) if m == 1} == model_positions
    assert all(recorder.response_logprobs[i] == -0.5 for i in model_positions)
    assert all(lp == 0.0 for i, lp in enumerate(recorder.response_logprobs) if i not in model_positions)
    assert recorder.turn_spans[-1][1] == len(recorder.response_ids)  # the response ends with the model's turn
    # the generator was given the whole conversation so far and its images, each turn
    assert [n for _, n in generate.calls] == [0, 1, 2]
    assert generate.calls[2][0] == recorder.prompt_ids + recorder.response_ids[: recorder.turn_spans[2][0]]
    # the images recorded are the images shown, in order
    assert [im.size for im in recorder.images] == [im.size for im in images]


def test_reply_cut_at_max_tokens_gets_the_template_closing_as_observation(tiny):
    _, processor = tiny
    tok = processor.tokenizer
    recorder = TokenRecordingPolicy(processor, ScriptedGenerate(tok, REPLIES, end=False))
    messages = asyncio.run(_drive(recorder, [_page("white"), _page("gray")]))
    _start, end = recorder.turn_spans[0]
    closing = recorder.response_ids[end: end + 2]
    assert closing == tok("<|im_end|>\n", add_special_tokens=False)["input_ids"]
    assert recorder.response_mask[end: end + 2] == [0, 0]  # the model did not produce them: not trained on
    text = processor.apply_chat_template(_template_form(messages), tokenize=False)
    whole = processor(text=[text], images=[_page("white"), _page("gray")])["input_ids"][0]
    assert recorder.prompt_ids + recorder.response_ids == list(whole[:-2])  # ends before the final "<|im_end|>\n"


def test_edited_history_is_refused(tiny):
    _, processor = tiny
    recorder = TokenRecordingPolicy(processor, ScriptedGenerate(processor.tokenizer, REPLIES))
    messages = [{"role": "user", "content": "Question: q?"}]

    async def go():
        reply = await recorder.complete(messages, SamplingParams())
        edited = messages + [{"role": "assistant", "content": reply.text + " (edited)"},
                             {"role": "user", "content": "more"}]
        await recorder.complete(edited, SamplingParams())

    with pytest.raises(PolicyError, match="differs from the reply"):
        asyncio.run(go())


def test_local_generate_samples_reproducibly_without_vision_tokens(tiny):
    model, processor = tiny
    generate = LocalTransformersGenerate(model, processor)
    images = [_page("white"), _page("black")]
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What?"}, {"type": "image"}]}],
        add_generation_prompt=True, tokenize=False)
    ids = processor(text=[prompt], images=images)["input_ids"][0]
    sampling = SamplingParams(temperature=1.0, max_tokens=40, seed=7)
    first = generate.generate_sync(list(ids), sampling, images)
    again = generate.generate_sync(list(ids), sampling, images)
    other = generate.generate_sync(list(ids), SamplingParams(temperature=1.0, max_tokens=40, seed=8), images)
    assert first.token_ids == again.token_ids and first.token_ids != other.token_ids
    assert len(first.logprobs) == len(first.token_ids) and all(lp <= 0 for lp in first.logprobs)
    assert not set(first.token_ids + other.token_ids) & set(generate.suppressed) and len(generate.suppressed) == 4
    # logprobs are the model's own: recompute them with a plain forward over the same ids and pixels
    full = torch.tensor([list(ids) + first.token_ids])
    pix = processor.image_processor(images=images, return_tensors="pt")
    with torch.no_grad():
        logits = model(input_ids=full, pixel_values=pix["pixel_values"], image_grid_thw=pix["image_grid_thw"]).logits
    lp = torch.log_softmax(logits[0, len(ids) - 1:-1].float(), -1).gather(-1, full[0, len(ids):, None]).squeeze(-1)
    assert torch.allclose(lp, torch.tensor(first.logprobs), atol=1e-4)
    with pytest.raises(PolicyError, match="image tokens"):
        generate.generate_sync(list(ids), sampling, images[:1])


def test_training_forward_sees_the_images_the_model_saw(tiny):
    """A forward hook on the vision tower: the pixels at the last rollout turn == the pixels in training."""
    model, processor = tiny
    seen: list[torch.Tensor] = []
    hook = model.model.visual.register_forward_pre_hook(lambda _m, args, kwargs=None: seen.append(args[0].clone()))
    try:
        recorder = TokenRecordingPolicy(processor, LocalTransformersGenerate(model, processor))
        images = [_page("white"), _page("navy", (84, 112))]
        messages = [{"role": "user", "content": "Question: what?"}]

        async def go():
            for turn in range(3):
                reply = await recorder.complete(messages, SamplingParams(temperature=1.0, max_tokens=8, seed=1))
                messages.append({"role": "assistant", "content": reply.text})
                if turn < 2:
                    messages.append({"role": "user", "content": [image_part(images[turn], f"img-{turn}", f"k{turn}")]})

        asyncio.run(go())
        rollout_pixels = seen[-1]
        traj = Trajectory("q", 0, recorder.prompt_ids, recorder.response_ids, recorder.response_mask,
                          recorder.response_logprobs, recorder.turn_spans, recorder.images,
                          EpisodeResult.failure("q", "n/a"))
        inputs = model_inputs(traj, processor, model)
        assert "pixel_values" in inputs and inputs["image_grid_thw"].shape[0] == len(images) == len(recorder.images)
        n_image_tokens = int((inputs["input_ids"] == model.config.image_token_id).sum())
        assert n_image_tokens == expected_image_tokens(processor, inputs["image_grid_thw"]) > 0
        seen.clear()
        with torch.no_grad():
            model(**{k: v for k, v in inputs.items() if k != "response_start"})
        assert len(seen) == 1 and torch.equal(seen[0], rollout_pixels)
        # a trajectory whose images went missing is refused, never trained blind
        traj.images = traj.images[:1]
        with pytest.raises(ValueError, match="image tokens"):
            model_inputs(traj, processor, model)
    finally:
        hook.remove()
