"""The VRAG agent's memory: one growing transcript, its images, its evidence and its credit graph.

What the model sees next is everything so far: the instructions and question, then each reply and
each observation (page images, crops, feedback) appended in order — never edited, which is what the
growing token recorder relies on. The evidence is every page shown, with the regions
cropped from it; the credit graph is built from the turn records by the one VRAG rule
(`vrag_rl.agent.credit_graph.vrag_credit_graph`: a crop builds on the turn that showed its source image,
the answer on every turn that put an image into the context), the same in evaluation and training.
"""
from __future__ import annotations

from typing import Any

from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.events import ImageRef
from vrag_rl.agent.policy import Message, text_part
from vrag_rl.agent.result import TurnRecord
from vrag_rl.vrag.credit_graph import vrag_credit_graph
from vrag_rl.vrag.prompts import Prompts


class Transcript:
    """The conversation as sent (`messages`), as logged (`log_messages`: images as references), and
    what was shown in it (see the module doc). Implements `vrag_rl.agent.engine.Memory`."""

    def __init__(self, question: str, prompts: Prompts, page_paths: dict[str, str]):
        self.messages: list[Message] = prompts.initial_messages(question)
        self.log_messages: list[dict[str, Any]] = [dict(m) for m in self.messages]
        self.images: list[ImageRef] = []
        self.shown_count: dict[str, int] = {}  # page id → times shown whole (crops not counted)
        self.page_order: list[str] = []
        self.crops_by_page: dict[str, list[list[int]]] = {}
        self.page_paths = page_paths  # the engine's: page id → the image's URL or the page id

    # ---- the Memory interface ------------------------------------------------------------------------------
    def context(self) -> list[Message]:
        return self.messages

    def add_reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self.log_messages.append({"role": "assistant", "content": text})

    def add_feedback(self, text: str) -> None:
        self.add_user([text_part(text)])

    def evidence(self) -> list[dict[str, Any]]:
        return [{"page_id": pid, "crops": self.crops_by_page.get(pid, [])} for pid in self.page_order]

    def credit_graph(self, records: list[TurnRecord]) -> CreditGraph:
        """The turn graph of `records` (see the module doc)."""
        return vrag_credit_graph(records, {ref.image_id: ref.page_id for ref in self.images})

    # ---- what the tools add --------------------------------------------------------------------------------
    def add_user(self, content: list[dict[str, Any]]) -> None:
        """An observation (text and image parts); the log keeps image references, not pixels."""
        self.messages.append({"role": "user", "content": content})
        logged = [{"type": "image_ref", "image_id": p["image_id"]} if p.get("type") == "image" else p for p in content]
        self.log_messages.append({"role": "user", "content": logged})

    def add_image(self, ref: ImageRef) -> None:
        """An image about to be shown: a whole page counts toward its repeats, a crop toward its page's crops."""
        self.images.append(ref)
        if ref.is_crop:
            self.crops_by_page.setdefault(ref.page_id, []).append(list(ref.page_box))
        else:
            self.shown_count[ref.page_id] = self.shown_count.get(ref.page_id, 0) + 1
        if ref.page_id not in self.page_order:
            self.page_order.append(ref.page_id)

    def next_image_id(self) -> str:
        return f"img-{len(self.images)}"
