"""Build tiny, randomly initialised Qwen2.5-VL and ColQwen2 models offline.

Why: model weights cannot be downloaded in CI, but the code that loads `vidore/colqwen2-v1.0` or
`Qwen/Qwen2.5-VL-7B-Instruct` must still be exercised. These builders create the same model
classes from small configs, with a locally trained BPE tokenizer and the real processors, and save
them with `save_pretrained`, so tests load them through exactly the code path a user's hub id
takes (`from_pretrained(path)`). ~0.2M parameters each, well under a second to build.

Random weights rank pages meaninglessly: test plumbing, shapes and determinism with them, and
retrieval quality with the real pretrained text embedder.
"""
from __future__ import annotations

from pathlib import Path

from search_engine.infra.torchvision_shim import install_torchvision_hook

install_torchvision_hook()

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen-style chat template (text and image parts), enough for apply_chat_template.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for c in message['content'] %}"
    "{% if c['type'] == 'image' or c['type'] == 'image_url' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_TOKENIZER_CORPUS = [
    "What is the revenue in 2021?",
    "<think>I should search for the revenue table.</think>",
    "<search>annual report revenue</search>",
    "<bbox>[10, 20, 200, 120]</bbox>",
    "<answer>42 million</answer>",
    "The quick brown fox jumps over the lazy dog. 0123456789 [ ] , .",
] * 40


def build_tokenizer(vocab_size: int = 600):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_TOKENIZER_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _vision_token_ids(tokenizer) -> dict[str, int]:
    convert = tokenizer.convert_tokens_to_ids
    return dict(
        image_token_id=convert("<|image_pad|>"),
        video_token_id=convert("<|video_pad|>"),
        vision_start_token_id=convert("<|vision_start|>"),
        vision_end_token_id=convert("<|vision_end|>"),
    )


def _text_config(tokenizer) -> dict:
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    )


def qwen2vl_config(tokenizer):
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(
        text_config=_text_config(tokenizer),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2),
        **_vision_token_ids(tokenizer),
    )


def qwen25vl_config(tokenizer):
    from transformers import Qwen2_5_VLConfig

    return Qwen2_5_VLConfig(
        text_config=_text_config(tokenizer),
        vision_config=dict(
            depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, fullatt_block_indexes=[0]
        ),
        **_vision_token_ids(tokenizer),
    )


def _image_processor(min_pixels: int, max_pixels: int):
    from transformers.utils import is_torchvision_available

    if is_torchvision_available():
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    else:  # pragma: no cover - PIL backend
        from transformers import Qwen2VLImageProcessorPil as ImageProcessor
    return ImageProcessor(min_pixels=min_pixels, max_pixels=max_pixels)


def _video_processor():
    from transformers import Qwen2VLVideoProcessor

    return Qwen2VLVideoProcessor()


def build_tiny_qwen25vl(path: str | Path, seed: int = 0, max_pixels: int = 512 * 28 * 28) -> Path:
    """Save a tiny random Qwen2.5-VL (model + processor) loadable by AutoModelForImageTextToText."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

    path = Path(path)
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = Qwen2_5_VLForConditionalGeneration(qwen25vl_config(tokenizer)).eval()
    processor = Qwen2_5_VLProcessor(
        image_processor=_image_processor(4 * 28 * 28, max_pixels),
        tokenizer=tokenizer,
        video_processor=_video_processor(),
        chat_template=CHAT_TEMPLATE,
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_tiny_colqwen2(path: str | Path, seed: int = 0, max_pixels: int = 256 * 28 * 28) -> Path:
    """Save a tiny random ColQwen2 loadable by colpali-engine's ColQwen2.from_pretrained."""
    import torch
    from colpali_engine.models import ColQwen2, ColQwen2Processor

    path = Path(path)
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = ColQwen2(qwen2vl_config(tokenizer)).eval()
    # A fresh ColQwen has a zero projection bias; left-padded query positions then embed to an
    # all-zero vector and L2-normalising it gives NaN under sdpa. Trained weights have a bias.
    torch.nn.init.normal_(model.custom_text_proj.bias, std=0.02)
    processor = ColQwen2Processor(
        image_processor=_image_processor(4 * 28 * 28, max_pixels),
        tokenizer=tokenizer,
        video_processor=_video_processor(),
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
