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

Safe to expose (issue 21): every argument is bounded in the tool's input schema and checked again
here (question and query length, top_k, document ids, page ids against the index's id grammar,
box, max_side, max_turns up to the server's `--max-turns`), so a caller gets a clear error rather
than a runaway episode; every call has a time limit (`--call-timeout`), past which it is cancelled
and the episode stops, as it does when the client cancels; replies carry ids, never absolute
paths of the server's machine (`scrub_paths`); page ids reach the search server's URL only
through the search client, which validates and escapes them.

Bad input (an unknown page, an empty box, no policy configured for `ask`) comes back as a tool error
whose text says what was wrong; the search server's own errors are passed on the same way.

Transports: stdio (what desktop assistants launch) and streamable HTTP (`--transport http`, served
at `/mcp`; loopback by default, with the SDK's DNS-rebinding protection for loopback hosts). Over
HTTP, `--auth-token` (or `VRAG_MCP_AUTH_TOKEN`) requires `Authorization: Bearer <token>` (or
`X-API-Key`, as the search server takes it); a non-loopback `--host` without a token is refused
unless `--insecure` is given.
"""

import contextlib
import enum
import io
import math
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image as MCPImage
from pydantic import Field

from search_engine.client import SearchClient, SearchError, check_id
from search_engine.infra.http_guard import BearerTokenMiddleware, is_loopback_host, whole_number
from search_engine.types import ID_PATTERN

INSTRUCTIONS = (
    "Tools over a corpus of document page images (PDF pages, slides, scans). Use search_pages to find "
    "pages, get_page_image to look at a page or zoom into a region of it (box in page pixels), and ask "
    "to have the VRAG agent answer a question with evidence pages and regions."
)

MAX_QUERY_CHARS = 2000  # the search server's own limit per query
MAX_QUESTION_CHARS = 4000
MAX_TOP_K = 50
MAX_DOC_IDS = 100
MIN_SIDE, MAX_SIDE = 16, 4096
MAX_PAGE_PIXELS = 64_000_000  # a larger page image is not decoded (decompression bombs; below PIL's warning)
MAX_TURNS_LIMIT = 50  # the most `--max-turns` may be: each turn is a policy call and a search or crop
DEFAULT_CALL_TIMEOUT = 300.0
MAX_ID_CHARS = 200
AUTH_TOKEN_ENV = "VRAG_MCP_AUTH_TOKEN"

# The tools' argument types: what the input schema says is exactly what is accepted (strict types, so "5"
# is not an integer and 5 not a string; an integral float is an integer, as JSON Schema has it).
Query = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for")]
Question = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_QUESTION_CHARS)]
Identifier = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN.pattern)]
DocIds = Annotated[list[Identifier] | None, Field(max_length=MAX_DOC_IDS)]
Coordinate = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Box = Annotated[list[Coordinate] | None, Field(min_length=4, max_length=4,
                                                description="[x1, y1, x2, y2] in the page's own pixels")]
if TYPE_CHECKING:  # a type built by a call is opaque to mypy: to it these are the ints they validate into
    TopK = int
    MaxSide = int
else:
    TopK = whole_number(ge=1, le=MAX_TOP_K)
    MaxSide = whole_number(ge=MIN_SIDE, le=MAX_SIDE)

T = TypeVar("T")

# An absolute path of the server's machine inside a message: POSIX (/a/b...) not preceded by a URL or
# word character (so "http://host/pages/x" and "10/20" stay), or a Windows drive path.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~%-])/(?:[^\s/'\"<>|]+/)+([^\s/'\"<>|]*)|\b[A-Za-z]:\\(?:[^\s\\'\"]+\\)*"
                            r"([^\s\\'\"]*)")
_PATH_KEYS = {"image_path", "source_path", "index_dir", "path"}


def scrub_paths(value: Any) -> Any:
    """`value` with no absolute path of this machine in it: path fields dropped, paths in text cut to their
    last part. MCP clients are other machines' agents; a path tells them only how this one is laid out."""
    if isinstance(value, str):
        return _ABSOLUTE_PATH.sub(lambda m: m.group(1) if m.group(1) is not None else (m.group(2) or ""), value)
    if isinstance(value, dict):
        return {k: scrub_paths(v) for k, v in value.items() if k not in _PATH_KEYS}
    if isinstance(value, (list, tuple)):
        return [scrub_paths(v) for v in value]
    return value


class CorpusTools:
    """The state behind the tools: one search client per event loop, one agent for `ask`, the bounds."""

    def __init__(self, search_url: str, policy_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, search_api_key: str | None = None, max_turns: int = 10,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT):
        if not 1 <= max_turns <= MAX_TURNS_LIMIT:
            raise ValueError(f"max_turns must be between 1 and {MAX_TURNS_LIMIT}")
        if not call_timeout > 0:
            raise ValueError("call_timeout must be positive")
        self.search_url = search_url
        self.policy_url = policy_url
        self.model = model
        self.api_key = api_key
        self.search_api_key = search_api_key
        self.max_turns = max_turns
        self.call_timeout = call_timeout
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

    async def within_time_limit(self, what: str, call: Awaitable[T]) -> T:
        """`call`'s result, or a ValueError once `call_timeout` has passed — the call is cancelled then
        (for `ask`, the episode stops: no further policy or search requests)."""
        with anyio.move_on_after(self.call_timeout) as scope:
            return await call
        if scope.cancelled_caught:
            raise ValueError(f"{what} took longer than the server's limit of {self.call_timeout:g} s and was "
                             "stopped (vrag-mcp --call-timeout)")
        raise AssertionError("unreachable")  # pragma: no cover

    async def search_pages(self, query: str, top_k: int = 5, doc_ids: list[str] | None = None) -> list[dict]:
        _check_text("query", query, MAX_QUERY_CHARS)
        _check_int("top_k", top_k, 1, MAX_TOP_K)
        if doc_ids is not None:
            if len(doc_ids) > MAX_DOC_IDS:
                raise ValueError(f"doc_ids: at most {MAX_DOC_IDS} documents")
            for doc_id in doc_ids:
                check_id(doc_id, "document id")
        hits = (await self.client().search([query], top_k=top_k, doc_ids=doc_ids))[0]
        return [{"rank": h.rank, "page_id": h.page_id, "doc_id": h.doc_id, "page_number": h.page_number,
                 "score": round(h.score, 6), "image_url": h.image_url,
                 "width": h.metadata.get("width"), "height": h.metadata.get("height")} for h in hits]

    async def get_page_image(self, page_id: str, box: list[float] | None = None, max_side: int = 1280) -> MCPImage:
        from PIL import Image

        check_id(page_id, "page id")
        _check_int("max_side", max_side, MIN_SIDE, MAX_SIDE)
        if box is not None and (len(box) != 4 or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                                          for v in box)):
            raise ValueError("box must be four finite numbers [x1, y1, x2, y2] in page pixels")
        data = await self.client().page_image(page_id)
        try:
            opened = Image.open(io.BytesIO(data))
        except (OSError, Image.DecompressionBombError) as exc:
            raise ValueError(f"page {page_id}: the search server sent an image that cannot be read "
                             f"({type(exc).__name__})") from None
        with opened:
            if opened.width * opened.height > MAX_PAGE_PIXELS:
                raise ValueError(f"page {page_id} is {opened.width}x{opened.height} pixels, over this server's "
                                 f"limit of {MAX_PAGE_PIXELS:,}")
            image = await anyio.to_thread.run_sync(opened.convert, "RGB")
        if box is not None:
            x1, y1, x2, y2 = (float(v) for v in box)
            x1, y1 = max(0.0, x1), max(0.0, y1)
            x2, y2 = min(float(image.width), x2), min(float(image.height), y2)
            if x2 - x1 < 1 or y2 - y1 < 1:
                raise ValueError(f"box {box} is empty or outside the page ({image.width}x{image.height} pixels)")
            image = image.crop((round(x1), round(y1), round(x2), round(y2)))
        return MCPImage(data=await anyio.to_thread.run_sync(_jpeg, image, max_side), format="jpeg")

    async def list_documents(self) -> list[dict]:
        return [{"doc_id": d["doc_id"], "num_pages": d["num_pages"], "kind": d.get("kind", "")}
                for d in await self.client().documents()]

    async def ask(self, question: str, max_turns: int | None = None) -> dict[str, Any]:
        _check_text("question", question, MAX_QUESTION_CHARS)
        if max_turns is not None:
            _check_int("max_turns", max_turns, 1, self.max_turns,
                       hint=" (this server's limit, vrag-mcp --max-turns)")
        agent = self.agent()
        overrides = {"max_turns": max_turns} if max_turns is not None else {}
        result = await agent.arun(question, **overrides)
        evidence = [{"page_id": e.get("page_id"), "crops": e.get("crops", [])} for e in result.evidence]
        return scrub_paths({"answer": result.answer, "status": result.status, "error": result.error,
                            "evidence": evidence, "pages_seen": list(result.retrieved_page_ids),
                            "turns": result.turns})

    async def aclose(self) -> None:
        """Close the connections opened on the running event loop (the search client's, the agent's)."""
        if self._client is not None:
            await self._client.aclose()
        if self._agent is not None:
            await self._agent.aclose()


def _jpeg(image, max_side: int) -> bytes:
    image.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


def _check_text(name: str, value: Any, max_chars: int) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} is empty")
    if len(value) > max_chars:
        raise ValueError(f"{name} is {len(value):,} characters; the limit is {max_chars:,}")


def _check_int(name: str, value: Any, low: int, high: int, hint: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer between {low} and {high}{hint}, not {value!r}"[:300])


def create_mcp_server(search_url: str, policy_url: str | None = None, model: str | None = None,
                      api_key: str | None = None, search_api_key: str | None = None,
                      max_turns: int = 10, call_timeout: float = DEFAULT_CALL_TIMEOUT) -> MCPServer:
    """An MCP server exposing the search engine at `search_url` and, given `policy_url`, the agent.

    `max_turns` is the default and the most a caller of `ask` may ask for; `call_timeout` bounds every
    tool call (seconds)."""
    tools = CorpusTools(search_url, policy_url, model, api_key, search_api_key, max_turns, call_timeout)

    @contextlib.asynccontextmanager
    async def close_connections_at_exit(_server: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await tools.aclose()

    server = MCPServer(name="vrag", title="VRAG document corpus", instructions=INSTRUCTIONS,
                       lifespan=close_connections_at_exit)
    server.corpus_tools = tools  # type: ignore[attr-defined]  # for callers that want to close it

    async def run(what: str, call: Awaitable[T]) -> T:
        """The tool's result; its anticipated failures as a ToolError without paths of this machine."""
        try:
            return await tools.within_time_limit(what, call)
        except (SearchError, ValueError) as exc:
            raise ToolError(scrub_paths(str(exc))) from None

    @server.tool(title="Search pages")
    async def search_pages(query: Query, top_k: TopK = 5, doc_ids: DocIds = None) -> list[dict]:
        """Rank the corpus's pages for a query; returns page ids, documents, page numbers, scores and the
        page size in pixels (the frame of get_page_image's box). `doc_ids` restricts to documents."""
        return await run("search_pages", tools.search_pages(query, top_k, doc_ids))

    @server.tool(title="Get a page image or a crop of it")
    async def get_page_image(page_id: Identifier, box: Box = None, max_side: MaxSide = 1280) -> MCPImage:
        """The image of a page (a `page_id` from search_pages), or of the region `box` = [x1, y1, x2, y2]
        in the page's own pixels, shrunk to at most `max_side` pixels on its longer side."""
        return await run("get_page_image", tools.get_page_image(page_id, box, max_side))

    @server.tool(title="List documents")
    async def list_documents() -> list[dict]:
        """The documents in the corpus: id, number of pages, kind."""
        return await run("list_documents", tools.list_documents())

    # The bound is this server's limit, known only now: a type built at run time (mypy sees an int).
    turns = Annotated[whole_number(ge=1, le=max_turns) | None,  # type: ignore[valid-type]
                      Field(description=f"model turns for this question (at most {max_turns}, the server's limit; "
                                        "default: that limit)")]

    @server.tool(title="Ask the VRAG agent")
    async def ask(question: Question, max_turns: turns = None) -> dict:  # type: ignore[valid-type]
        """Answer a question from the corpus: the agent searches, zooms into page regions and answers.
        Returns the answer, the evidence (pages and the page-pixel boxes it zoomed into), the pages it
        saw and the episode's status (answered, forced_answer, token_budget or failed)."""
        return await run("ask", tools.ask(question, max_turns))

    return server


def http_app(server: MCPServer, host: str = "127.0.0.1", auth_token: str | None = None):
    """The streamable-HTTP ASGI app (at `/mcp`), behind a bearer-token check when `auth_token` is set."""
    app = server.streamable_http_app(host=host)
    if not auth_token:
        return app
    return BearerTokenMiddleware(app, auth_token, accept_x_api_key=True,
                                 message="missing or wrong token (send Authorization: Bearer <token>, "
                                         "the token vrag-mcp was started with)")


class Transport(str, enum.Enum):
    """How MCP clients reach the server."""

    stdio = "stdio"
    http = "http"


cli = typer.Typer(add_completion=False, rich_markup_mode=None)


@cli.command()
def serve(
    search_url: Annotated[str, typer.Option(envvar="VRAG_SEARCH_URL",
                                            help="search server (ours or upstream VRAG's)")] = "http://127.0.0.1:8002",
    search_api_key: Annotated[str | None, typer.Option(envvar="VRAG_SEARCH_API_KEY")] = None,
    policy_url: Annotated[str | None, typer.Option(
        envvar="VRAG_POLICY_URL", help="OpenAI-compatible VLM endpoint for `ask` (omit: no agent)")] = None,
    model: Annotated[str | None, typer.Option(envvar="VRAG_MODEL", help="model name at that endpoint")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="VRAG_API_KEY", help="key for that endpoint")] = None,
    max_turns: Annotated[int, typer.Option(
        help=f"default and most turns `ask` may run (1 to {MAX_TURNS_LIMIT})")] = 10,
    call_timeout: Annotated[float, typer.Option(
        help="seconds any tool call may take before it is stopped")] = DEFAULT_CALL_TIMEOUT,
    transport: Annotated[Transport, typer.Option(
        help="stdio (desktop assistants launch it) or streamable HTTP at /mcp")] = Transport.stdio,
    host: Annotated[str, typer.Option(help="HTTP listen address (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8003,
    auth_token: Annotated[str | None, typer.Option(
        envvar=AUTH_TOKEN_ENV, help="HTTP only: require 'Authorization: Bearer <token>'")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="HTTP only: allow a non-loopback --host without --auth-token")] = False,
) -> None:
    """Serve a VRAG corpus (and agent) as MCP tools, over stdio or streamable HTTP."""
    if not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise typer.BadParameter(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    if not call_timeout > 0:
        raise typer.BadParameter("--call-timeout must be positive")
    auth_token = auth_token or None  # an empty VRAG_MCP_AUTH_TOKEN means none
    if transport is Transport.http and not auth_token and not insecure and not is_loopback_host(host):
        raise typer.BadParameter(
            f"--host {host} is reachable from other machines: give --auth-token (or {AUTH_TOKEN_ENV}) so only "
            "clients with the token can use the tools, or --insecure to serve without one")
    server = create_mcp_server(search_url, policy_url, model, api_key, search_api_key, max_turns, call_timeout)
    if transport is Transport.stdio:
        server.run("stdio")
    else:
        import uvicorn

        uvicorn.run(http_app(server, host, auth_token), host=host, port=port)


def main(argv: list[str] | None = None) -> None:
    """`vrag-mcp`: run the MCP server over stdio or streamable HTTP (exit 2 with one line for unsafe settings)."""
    cli(args=argv, prog_name="vrag-mcp")


if __name__ == "__main__":
    main()
