"""The VRAG agent's memory: one growing transcript, its images, its evidence and its step graph.

What the model sees next is everything so far: the instructions and question, then each reply and
each observation (page images, crops, feedback) appended in order — never edited, which is what the
token recorder relies on (`appends_only`). The evidence is every page shown, with the regions
cropped from it; the step graph says which turn built on which (a crop on the turn that showed its
source image, an answer on the turn that showed the last image before it).
"""
from __future__ import annotations

from typing import Any, ClassVar

from vrag_rl.agent.events import ImageRef
from vrag_rl.agent.policy import Message, text_part
from vrag_rl.agent.prompts import Prompts
from vrag_rl.agent.result import TurnRecord
from vrag_rl.agent.step_graph import ROOT_ID, StepGraph, StepNode


class Transcript:
    """The conversation as sent (`messages`), as logged (`log_messages`: images as references), and
    what was shown in it (see the module doc). Implements `vrag_rl.agent.engine.Memory`."""

    appends_only: ClassVar[bool] = True

    def __init__(self, question: str, prompts: Prompts, page_paths: dict[str, str]):
        self.messages: list[Message] = prompts.initial_messages(question)
        self.log_messages: list[dict[str, Any]] = [dict(m) for m in self.messages]
        self.images: list[ImageRef] = []
        self.shown_count: dict[str, int] = {}  # page id → times shown whole (crops not counted)
        self.page_order: list[str] = []
        self.crops_by_page: dict[str, list[list[int]]] = {}
        self.page_paths = page_paths  # the engine's: page id → file or URL
        self._graph_nodes: list[StepNode] = []
        self._step_of_image: dict[str, str] = {}
        self._answer_step: str | None = None

    # ---- the Memory interface ------------------------------------------------------------------------------
    def context(self) -> list[Message]:
        return self.messages

    def add_reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self.log_messages.append({"role": "assistant", "content": text})

    def add_feedback(self, text: str) -> None:
        self.add_user([text_part(text)])

    def evidence(self) -> list[dict[str, Any]]:
        return [{"page_id": pid, "image_path": self.page_paths.get(pid, ""), "crops": self.crops_by_page.get(pid, [])}
                for pid in self.page_order]

    def step_graph(self) -> StepGraph:
        """The turn graph: search → root, crop → the step that showed its source, answer → last image's step."""
        return StepGraph.build(self._graph_nodes, self._answer_step)

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

    # ---- the step graph ------------------------------------------------------------------------------------
    def add_step(self, record: TurnRecord, kind: str, parents: tuple[str, ...], evidence: tuple[str, ...]) -> None:
        step_id = f"t{record.index}"
        self._graph_nodes.append(StepNode(step_id, parents or (ROOT_ID,), kind, (record.index,), evidence))
        for image_id in record.shown_image_ids:
            self._step_of_image[image_id] = step_id

    def add_answer_step(self, record: TurnRecord) -> None:
        self.add_step(record, "answer", self.last_image_step(), ())
        self._answer_step = f"t{record.index}"

    def step_of_image(self, image_id: str) -> str:
        return self._step_of_image.get(image_id, ROOT_ID)

    def last_image_step(self) -> tuple[str, ...]:
        return (self._step_of_image[self.images[-1].image_id],) if self.images else ()
