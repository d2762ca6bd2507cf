"""Answer and retrieval metrics for evaluating the agent.

Answer metrics follow the benchmarks VRAG is compared on (SQuAD EM/F1, DocVQA ANLS); retrieval
metrics match the NDCG that upstream VRAG-RL uses as its retrieval-efficiency reward, so an
offline evaluation and the RL reward agree on what "good retrieval" means.

Every answer metric takes `refs` as one string or a list of acceptable answers and returns the
best score over them; a None or empty prediction scores 0 (a failed episode is a wrong answer).
"""
from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

Refs = str | Sequence[str] | None

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def normalize_answer(text: str | None) -> str:
    """SQuAD v1.1 normalisation (Rajpurkar et al. 2016, official eval script).

    Lowercase, drop punctuation (ASCII and Unicode), drop the articles a/an/the, collapse whitespace: so
    "The $341 million." and "341 million" (and "¥341 million") normalise alike.
    """
    if not text:
        return ""
    text = text.lower()
    # ASCII punctuation as SQuAD, plus every Unicode punctuation mark (full-width 。，、： and the like),
    # so "样式为 beta。" contains "beta" as "... beta." does; and every currency sign, as SQuAD drops "$"
    # ("¥2,870,611" holds "2,870,611" as "$2,870,611" does)
    text = "".join(ch for ch in text if ch not in _PUNCT and not unicodedata.category(ch).startswith("P")
                   and unicodedata.category(ch) != "Sc")
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _as_list(refs: Refs) -> list[str]:
    if refs is None:
        return []
    if isinstance(refs, str):
        return [refs]
    return [r for r in refs if isinstance(r, str)]


def _best(pred: str | None, refs: Refs, score: Callable[[str, str], float]) -> float:
    if pred is None or not str(pred).strip():
        return 0.0
    candidates = _as_list(refs)
    return max((score(str(pred), r) for r in candidates), default=0.0)


def exact_match(pred: str | None, refs: Refs) -> float:
    """SQuAD exact match: 1.0 when the normalised prediction equals a normalised reference."""

    def one(p: str, r: str) -> float:
        return float(normalize_answer(p) == normalize_answer(r))

    return _best(pred, refs, one)


def _f1(pred: str, ref: str) -> float:
    pred_tokens = normalize_answer(pred).split()
    ref_tokens = normalize_answer(ref).split()
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)
    common = Counter(pred_tokens) & Counter(ref_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(pred: str | None, refs: Refs) -> float:
    """SQuAD token-level F1 (bag of normalised tokens): partial credit for partial answers."""
    return _best(pred, refs, _f1)


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert/delete/substitute, cost 1) with a two-row DP: O(len(a)*len(b))."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _anls_norm(text: str) -> str:
    # The DocVQA evaluator only lowercases and collapses whitespace (no punctuation stripping).
    return " ".join(text.lower().split())


def anls(pred: str | None, refs: Refs, threshold: float = 0.5) -> float:
    """Average Normalized Levenshtein Similarity for one question (Biten et al. 2019, ST-VQA;
    used by DocVQA, Mathew et al. 2021).

    With NL = lev(p, r) / max(|p|, |r|), the score is 1 - NL when NL < `threshold`, else 0: so
    OCR-level typos get partial credit but a different answer gets none.
    """

    def one(p: str, r: str) -> float:
        p, r = _anls_norm(p), _anls_norm(r)
        longest = max(len(p), len(r))
        if longest == 0:
            return 0.0
        distance = levenshtein(p, r) / longest
        return 1.0 - distance if distance < threshold else 0.0

    return _best(pred, refs, one)


def contains_match(pred: str | None, refs: Refs) -> float:
    """1.0 when a normalised reference appears in the normalised prediction as whole tokens.

    VLMs answer in sentences ("Revenue was $341 million in 2023"), which EM scores 0; this is
    the lenient "accuracy" used by Search-R1-style evaluations. Matching on token boundaries
    keeps "12" from matching inside "120".
    """

    def one(p: str, r: str) -> float:
        ref = normalize_answer(r)
        if not ref:
            return 0.0
        if _CJK_CHAR.search(ref):
            # Chinese/Japanese/Korean text has no spaces between words: whole-token matching would
            # miss a reference inside a sentence, so compare the texts with spaces removed.
            return float(ref.replace(" ", "") in normalize_answer(p).replace(" ", ""))
        return float(f" {ref} " in f" {normalize_answer(p)} ")

    return _best(pred, refs, one)


def _unique(ids: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def recall_at_k(retrieved_ids: Sequence[str], relevant_ids: Iterable[str], k: int) -> float | None:
    """Fraction of the relevant pages found among the first k retrieved (standard IR recall@k).

    Returns None when there are no relevant pages: the metric is undefined, and averaging a 0
    or 1 there would skew the mean.
    """
    relevant = set(relevant_ids)
    if not relevant:
        return None
    top = set(_unique(retrieved_ids)[:k])
    return len(top & relevant) / len(relevant)


def ndcg_at_k(retrieved_ids: Sequence[str], relevant_ids: Iterable[str], k: int) -> float | None:
    """Binary-relevance NDCG@k (Järvelin & Kekäläinen 2002), as in VRAG-RL's retrieval reward.

    DCG = sum over the first k retrieved pages of rel_i / log2(i + 1) (with binary rel,
    2^rel - 1 == rel); the ideal DCG puts min(k, |relevant|) relevant pages first. Duplicates
    in `retrieved_ids` count once. None when there are no relevant pages.
    """
    relevant = set(relevant_ids)
    if not relevant:
        return None
    top = _unique(retrieved_ids)[:k]
    dcg = sum(1.0 / math.log2(rank + 1) for rank, pid in enumerate(top, start=1) if pid in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(relevant)) + 1))
    return dcg / ideal if ideal > 0 else 0.0
