"""The document corpus as MCP tools, for desktop assistants and other agents (`vrag-mcp`).

Built on the official MCP Python SDK (`mcp.server.mcpserver.MCPServer`). It is a thin layer over
two things that already run: a search server (`vrag-search serve`, or upstream VRAG's — the search
client speaks both) and, for `ask`, an OpenAI-compatible policy endpoint that the `VRAG` agent
drives. Tools:

* `search_pages(query, top_k, doc_ids)` — ranked pages (id, document, page number, score, image URL);
* `get_page_image(page_id, box, max_side)` — the page image, or the crop `box` = [x1, y1, x2, y2] in
  the page's own pixels (the frame `search_pages` reports as width/height), as an MCP image;
* `list_documents()` — the indexed documents;
* `ask(question, max_turns)` — the agent searches, zooms and answers; the answer comes with its
  evidence (pages and the page-pixel boxes it zoomed into) and the episode's status.

Bad input (an unknown page, an empty box, no policy configured for `ask`) comes back as a tool error
whose text says what was wrong; the search server's own errors are passed on the same way.

Transports: stdio (what desktop assistants launch) and streamable HTTP (`--transport http`, served
at `/mcp`; loopback by default, with the SDK's DNS-rebinding protection for loopback hosts).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image as MCPImage

from search_engine.client import SearchClient, SearchError

INSTRUCTIONS = (
    "Tools over a corpus of document page images (PDF pages, slides, scans). Use search_pages to find "
    "pages, get_page_image to look at a page or zoom into a region of it (box in page pixels), and ask "
    "to have the VRAG agent answer a question with evidence pages and regions."
)


class CorpusTools:
    """The state behind the tools: one search client per event loop, one agent for `ask`."""

    def __init__(self, search_url: str, policy_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, search_api_key: str | None = None, max_turns: int = 10):
        self.search_url = search_url
        self.policy_url = policy_url
        self.model = model
        self.api_key = api_key
        self.search_api_key = search_api_key
        self.max_turns = max_turns
        self._client: SearchClient | None = None
        self._agent = None

    def client(self) -> SearchClient:
        """The search client (it keeps a connection pool per event loop itself)."""
        if self._client is None:
            self._client = SearchClient(self.search_url, api_key=self.search_api_key)
        return self._client

    def agent(self):
        """The VRAG agent for `ask`; an error that says how to configure it when no policy is given."""
        if self.policy_url is None:
            raise ValueError("ask needs a policy endpoint: start vrag-mcp with --policy-url (an OpenAI-compatible "
                             "VLM endpoint such as vLLM's http://host:8001/v1)")
        if self._agent is None:
            from vrag_rl import VRAG

            self._agent = VRAG(base_url=self.policy_url, search_url=self.search_url, model=self.model,
                               api_key=self.api_key, search_api_key=self.search_api_key, max_turns=self.max_turns)
        return self._agent

    async def search_pages(self, query: str, top_k: int = 5, doc_ids: list[str] | None = None) -> list[dict]:
        if not query.strip():
            raise ValueError("query is empty")
        if not 1 <= top_k <= 50:
            raise ValueError("top_k must be between 1 and 50")
        hits = (await self.client().search([query], top_k=top_k, doc_ids=doc_ids))[0]
        return [{"rank": h.rank, "page_id": h.page_id, "doc_id": h.doc_id, "page_number": h.page_number,
                 "score": round(h.score, 6), "image_url": h.image_url,
                 "width": h.metadata.get("width"), "height": h.metadata.get("height")} for h in hits]

    async def get_page_image(self, page_id: str, box: list[float] | None = None, max_side: int = 1280) -> MCPImage:
        from PIL import Image

        if not 16 <= max_side <= 4096:
            raise ValueError("max_side must be between 16 and 4096")
        data = await self.client().page_image(page_id)
        with Image.open(io.BytesIO(data)) as opened:
            image = opened.convert("RGB")
        if box is not None:
            if len(box) != 4:
                raise ValueError("box must be [x1, y1, x2, y2] in page pixels")
            x1, y1, x2, y2 = (float(v) for v in box)
            x1, y1 = max(0.0, x1), max(0.0, y1)
            x2, y2 = min(float(image.width), x2), min(float(image.height), y2)
            if x2 - x1 < 1 or y2 - y1 < 1:
                raise ValueError(f"box {box} is empty or outside the page ({image.width}x{image.height} pixels)")
            image = image.crop((round(x1), round(y1), round(x2), round(y2)))
        image.thumbnail((max_side, max_side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=88)
        return MCPImage(data=buffer.getvalue(), format="jpeg")

    async def list_documents(self) -> list[dict]:
        return [{"doc_id": d["doc_id"], "num_pages": d["num_pages"], "kind": d.get("kind", "")}
                for d in await self.client().documents()]

    async def ask(self, question: str, max_turns: int | None = None) -> dict[str, Any]:
        if not question.strip():
            raise ValueError("question is empty")
        agent = self.agent()
        overrides = {"max_turns": max_turns} if max_turns else {}
        result = await agent.arun(question, **overrides)
        return {"answer": result.answer, "status": result.status, "error": result.error,
                "evidence": result.evidence, "pages_seen": list(result.retrieved_page_ids), "turns": result.turns}

    async def aclose(self) -> None:
        """Close the connections opened on the running event loop (the search client's, the agent's)."""
        if self._client is not None:
            await self._client.aclose()
        if self._agent is not None:
            await self._agent.aclose()


def create_mcp_server(search_url: str, policy_url: str | None = None, model: str | None = None,
                      api_key: str | None = None, search_api_key: str | None = None,
                      max_turns: int = 10) -> MCPServer:
    """An MCP server exposing the search engine at `search_url` and, given `policy_url`, the agent."""
    tools = CorpusTools(search_url, policy_url, model, api_key, search_api_key, max_turns)

    @contextlib.asynccontextmanager
    async def close_connections_at_exit(_server: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await tools.aclose()

    server = MCPServer(name="vrag", title="VRAG document corpus", instructions=INSTRUCTIONS,
                       lifespan=close_connections_at_exit)
    server.corpus_tools = tools  # type: ignore[attr-defined]  # for callers that want to close it

    @server.tool(title="Search pages")
    async def search_pages(query: str, top_k: int = 5, doc_ids: list[str] | None = None) -> list[dict]:
        """Rank the corpus's pages for a query; returns page ids, documents, page numbers, scores and the
        page size in pixels (the frame of get_page_image's box). `doc_ids` restricts to documents."""
        try:
            return await tools.search_pages(query, top_k, doc_ids)
        except (SearchError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(title="Get a page image or a crop of it")
    async def get_page_image(page_id: str, box: list[float] | None = None, max_side: int = 1280) -> MCPImage:
        """The image of a page (a `page_id` from search_pages), or of the region `box` = [x1, y1, x2, y2]
        in the page's own pixels, shrunk to at most `max_side` pixels on its longer side."""
        try:
            return await tools.get_page_image(page_id, box, max_side)
        except (SearchError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(title="List documents")
    async def list_documents() -> list[dict]:
        """The documents in the corpus: id, number of pages, kind."""
        try:
            return await tools.list_documents()
        except (SearchError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(title="Ask the VRAG agent")
    async def ask(question: str, max_turns: int | None = None) -> dict:
        """Answer a question from the corpus: the agent searches, zooms into page regions and answers.
        Returns the answer, the evidence (pages and the page-pixel boxes it zoomed into), the pages it
        saw and the episode's status (answered, forced_answer, token_budget or failed)."""
        try:
            return await tools.ask(question, max_turns)
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    return server


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vrag-mcp", description="Serve a VRAG corpus (and agent) as MCP tools")
    parser.add_argument("--search-url", default=os.environ.get("VRAG_SEARCH_URL", "http://127.0.0.1:8002"),
                        help="search server (ours or upstream VRAG's); env VRAG_SEARCH_URL")
    parser.add_argument("--search-api-key", default=os.environ.get("VRAG_SEARCH_API_KEY"))
    parser.add_argument("--policy-url", default=os.environ.get("VRAG_POLICY_URL"),
                        help="OpenAI-compatible VLM endpoint for `ask` (omit: no agent); env VRAG_POLICY_URL")
    parser.add_argument("--model", default=os.environ.get("VRAG_MODEL"), help="model name at that endpoint")
    parser.add_argument("--api-key", default=os.environ.get("VRAG_API_KEY"), help="key for that endpoint")
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (desktop assistants launch it) or streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP listen address (loopback by default)")
    parser.add_argument("--port", type=int, default=8003)
    return parser


def main(argv: list[str] | None = None) -> None:
    """`vrag-mcp`: run the MCP server over stdio or streamable HTTP."""
    args = build_parser().parse_args(argv)
    server = create_mcp_server(args.search_url, args.policy_url, args.model, args.api_key, args.search_api_key,
                               args.max_turns)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
