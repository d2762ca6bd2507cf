"""The project's search server as a tool of verl's own `tool_agent` loop (for `scripts/bench_rollout_cost.py`).

Why: to compare our `vrag_agent` loop with verl's `ToolAgentLoop` (verl/experimental/agent_loop/tool_agent_loop.py)
on the same model and the same tool, verl's loop needs that tool in its own terms: a `BaseTool` subclass
(verl/tools/base_tool.py) declared in verl's tool config YAML (`actor_rollout_ref.rollout.multi_turn.tool_config_path`,
loaded by `verl.tools.tool_registry.initialize_tools_from_config`). It is not part of the training path.

- `SearchPageTool` (`search(query)`): `POST /search` on our server through `search_engine.client.SearchClient`,
  the top hit's page id as text in the tiny task's words (`Result for {query}: page {page_id}.`) and, unless
  `with_image: false`, the page image resized by the model's rule (`PageImageStore.view`, the same decode cache
  and resize our episode uses), so both loops put the same observation in front of the model;
- `SearchTagParser` (`multi_turn.format=vrag_search_tags`): a verl `ToolParser` that reads our action tags
  (`<search>q</search>`) as a call of that tool. The tiny models were trained on those tags, not on hermes'
  `<tool_call>{json}</tool_call>`: with hermes verl's loop sees no tool call and ends every episode after one
  turn; with this parser it runs the same multi-turn episodes ours does, so cost per turn compares like with like.

Both keep counters (calls, hits, parsed calls) so a benchmark can say how many tool calls really happened.
"""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.ray_utils import get_event_loop

from search_engine.client import SearchClient
from vrag_rl.agent.page_images import PageImageStore

TOOL_NAME = "search"
TAG_FORMAT = "vrag_search_tags"
RESULT_TEXT = "Result for {query}: page {page_id}."  # testkit.tiny_task.PROMPTS["search_result"]
NO_RESULT_TEXT = "No new page for {query}."  # testkit.tiny_task.PROMPTS["no_new_results"]
SEARCH_TAG = re.compile(r"<search>(.*?)</search>", re.DOTALL)

SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Search the document collection; returns the best page's id and image.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "search words"}},
                       "required": ["query"]},
    },
}


class SearchPageTool(BaseTool):
    """`search(query)` against the project's search server (see the module docstring).

    Config keys: `search_url` (the server's root), `top_k` (1), `with_image` (true), `min_pixels` / `max_pixels` /
    `resize_factor` (the agent's image budget), `timeout_s`. One `SearchClient` per event loop, reused across calls
    (verl creates and releases an instance per call; a connection per call would charge verl's loop for a choice
    of this tool's).
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None):
        super().__init__(config, tool_schema or OpenAIFunctionToolSchema.model_validate(SCHEMA))
        self.url = str(config["search_url"])
        self.top_k = int(config.get("top_k", 1))
        self.with_image = bool(config.get("with_image", True))
        self.min_pixels = int(config.get("min_pixels", 3136))
        self.max_pixels = int(config.get("max_pixels", 6272))
        self.factor = int(config.get("resize_factor", 28))
        self.timeout_s = float(config.get("timeout_s", 30.0))
        self.pages = PageImageStore()
        self._clients: dict[int, SearchClient] = {}
        self.calls = self.hits = self.errors = 0

    def _client(self) -> SearchClient:
        key = id(asyncio.get_running_loop())
        if key not in self._clients:
            self._clients[key] = SearchClient(self.url, timeout=self.timeout_s, max_retries=1)
        return self._clients[key]

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float,
                                                                                                  dict]:
        """The top hit's page id (and image); an empty query or a server error is a text answer, not a raise."""
        self.calls += 1
        query = str(parameters.get("query", "")).strip()
        if not query:
            self.errors += 1
            return ToolResponse(text="Invalid: empty query."), 0.0, {"ok": False}
        client = self._client()
        try:
            hits = (await client.search([query], top_k=self.top_k))[0]
        except Exception as exc:  # noqa: BLE001 - the model reads the failure, as verl's own tools answer
            self.errors += 1
            return ToolResponse(text=f"Search failed: {exc}"[:300]), 0.0, {"ok": False}
        if not hits:
            return ToolResponse(text=NO_RESULT_TEXT.format(query=query)), 0.0, {"ok": True, "page_id": None}
        self.hits += 1
        hit = hits[0]
        text = RESULT_TEXT.format(query=query, page_id=hit.page_id)
        if not self.with_image:
            return ToolResponse(text=text), 0.0, {"ok": True, "page_id": hit.page_id}
        key = f"{hit.page_id}@{hit.image_path or hit.image_url}"
        page = await self.pages.page(key, hit.image_path or None, lambda: client.page_image(hit.page_id))
        view, _ = self.pages.view(key, page, (0, 0, page.width, page.height), self.factor, self.min_pixels,
                                  self.max_pixels)
        return ToolResponse(text=text, image=[view]), 0.0, {"ok": True, "page_id": hit.page_id}

    async def aclose(self) -> None:
        """Close the clients this tool opened (call on the loop that used them)."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


@ToolParser.register(TAG_FORMAT)
class SearchTagParser(ToolParser):
    """Our `<search>q</search>` action as verl tool calls of `search` (see the module docstring).

    Decodes in the loop's executor, as verl's hermes parser does; the content is the whole reply (the tiny chat
    template renders it as written)."""

    calls_parsed = 0  # class-wide: verl builds a parser per trajectory

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)

    async def extract_tool_calls(self, responses_ids: list[int],
                                 tools: list[OpenAIFunctionToolSchema] | None = None) -> tuple[str, list[FunctionCall]]:
        text = await get_event_loop().run_in_executor(None, self.tokenizer.decode, responses_ids)
        calls = [FunctionCall(name=TOOL_NAME, arguments=json.dumps({"query": query.strip()}))
                 for query in SEARCH_TAG.findall(text)]
        SearchTagParser.calls_parsed += len(calls)
        return text, calls


def tool_config(search_url: str, *, with_image: bool = True, min_pixels: int = 3136, max_pixels: int = 6272,
                top_k: int = 1) -> dict[str, Any]:
    """verl's tool config (the YAML `multi_turn.tool_config_path` names) declaring `SearchPageTool`."""
    return {"tools": [{
        "class_name": f"{__name__}.SearchPageTool",
        "config": {"type": "native", "search_url": search_url, "top_k": top_k, "with_image": with_image,
                   "min_pixels": min_pixels, "max_pixels": max_pixels},
        "tool_schema": SCHEMA,
    }]}
