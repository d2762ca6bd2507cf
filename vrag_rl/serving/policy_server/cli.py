"""`vrag-policy serve`: an OpenAI-compatible policy endpoint (transformers model, scripted replay, or rule-based OCR).

Examples:
  vrag-policy serve --backend transformers --model Qwen/Qwen2.5-VL-7B-Instruct --port 8001
  vrag-policy serve --backend scripted --script replies.json
  vrag-policy serve --backend rule-based            # CPU-only demo policy that reads pages with tesseract
"""
from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from vrag_rl.agent.plugins import stand_in_plugins

if TYPE_CHECKING:
    from vrag_rl.serving.policy_server.app import Backend

BUILT_IN_BACKENDS = ("transformers", "scripted")


def backend_names() -> tuple[str, ...]:
    """The backends `serve` can run: the built-in ones and the installed agent plugins' CPU stand-ins
    (`rule-based`, `vimrag-rule-based`; see `vrag_rl.agent.plugins`)."""
    return BUILT_IN_BACKENDS + tuple(sorted(stand_in_plugins()))


def _known_backend(name: str) -> str:
    if name not in backend_names():
        raise typer.BadParameter(f"{name!r} is not one of {', '.join(backend_names())}")
    return name

DEFAULT_MAX_BODY_BYTES = 64 * 2**20


@dataclasses.dataclass
class ServeOptions:
    """What `vrag-policy serve` was asked for; `build_app` turns it into the app (tests build it directly)."""

    backend: str = "transformers"
    model: str | None = None
    script: str | None = None
    served_model_name: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_pixels: int = 512 * 28 * 28
    min_pixels: int = 256 * 28 * 28
    api_key: str | None = None
    search_url: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def build_app(options: ServeOptions):
    """The app for `serve` options; `SystemExit` with one clear line for unusable ones."""
    from vrag_rl.serving.policy_server.app import create_app

    backend: Backend
    if options.backend == "transformers":
        if not options.model:
            raise SystemExit("vrag-policy: --model is required for the transformers backend")
        from vrag_rl.serving.policy_server.transformers_backend import TransformersBackend

        try:
            backend = TransformersBackend(options.model, device=options.device, dtype=options.dtype,
                                          max_pixels=options.max_pixels, min_pixels=options.min_pixels)
        except (RuntimeError, ValueError) as exc:
            raise SystemExit(f"vrag-policy: {exc}") from None
        name = options.served_model_name or options.model
    elif options.backend == "scripted":
        if not options.script:
            raise SystemExit("vrag-policy: --script FILE is required for the scripted backend")
        from vrag_rl.serving.policy_server.scripted import ScriptedBackend

        try:
            backend = ScriptedBackend.from_file(options.script)
        except ValueError as exc:
            raise SystemExit(f"vrag-policy: {exc}") from None
        name = options.served_model_name or "scripted"
    elif options.backend in stand_in_plugins():  # an agent plugin's CPU stand-in (`rule-based` is VRAG's)
        backend = stand_in_plugins()[options.backend].load("stand_in_backend")(search_url=options.search_url)
        name = options.served_model_name or options.backend
    else:
        raise SystemExit(f"vrag-policy: unknown backend {options.backend!r}; "
                         f"choose one of {', '.join(backend_names())}")
    return create_app(backend, name, api_key=options.api_key, max_body_bytes=options.max_body_bytes)


# "\b" keeps click from re-wrapping the example lines
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help=(__doc__ or "").replace("Examples:", "\b\nExamples:"))


@app.callback()
def _commands() -> None:
    """Keeps `serve` a subcommand (typer would otherwise run a lone command without its name)."""


@app.command()
def serve(
    backend: Annotated[str, typer.Option(
        callback=_known_backend,
        help="which policy answers: transformers, scripted, or an agent plugin's CPU stand-in "
             "(rule-based: VRAG's; vimrag-rule-based)")] = "transformers",
    model: Annotated[str | None, typer.Option(help="hub id or local folder (transformers backend)")] = None,
    script: Annotated[str | None, typer.Option(
        help="JSON/YAML file {scripts: {key: [replies]}, default: [replies]} (scripted)")] = None,
    served_model_name: Annotated[str | None, typer.Option(
        help="name in /v1/models (default: --model or the backend)")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    dtype: Annotated[str, typer.Option(
        help="auto (bf16 on GPU, fp32 on CPU), bfloat16, float16, float32")] = "auto",
    max_pixels: Annotated[int, typer.Option(min=1, help="image budget per image (transformers)")] = 512 * 28 * 28,
    min_pixels: Annotated[int, typer.Option(min=1)] = 256 * 28 * 28,
    host: Annotated[str, typer.Option(help="0.0.0.0 exposes it: set --api-key then")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8001,
    api_key: Annotated[str | None, typer.Option(help="require Authorization: Bearer KEY on /v1/*")] = None,
    log_level: str = "info",
    search_url: Annotated[str | None, typer.Option(
        help="rule-based stand-ins: the search server to fetch page layouts from (default env "
             "VRAG_SEARCH_URL; none: they OCR the images they are sent)")] = None,
    max_body_bytes: Annotated[int, typer.Option(
        min=1, help="larger request bodies are refused with 413")] = DEFAULT_MAX_BODY_BYTES,
) -> None:
    """Start the server."""
    options = ServeOptions(backend=backend, model=model, script=script, served_model_name=served_model_name,
                           device=device, dtype=dtype, max_pixels=max_pixels, min_pixels=min_pixels,
                           api_key=api_key, search_url=search_url, max_body_bytes=max_body_bytes)
    server = build_app(options)
    import uvicorn

    print(f"vrag-policy: serving {server.state.model_name!r} ({options.backend}) on http://{host}:{port}/v1",
          file=sys.stderr, flush=True)
    uvicorn.run(server, host=host, port=port, log_level=log_level)


def main(argv: list[str] | None = None) -> None:
    """The `vrag-policy` console script."""
    app(args=argv, prog_name="vrag-policy")


if __name__ == "__main__":
    main()
