"""`vrag-policy serve`: an OpenAI-compatible policy endpoint (transformers model, scripted replay, or rule-based OCR).

Examples:
  vrag-policy serve --backend transformers --model Qwen/Qwen2.5-VL-7B-Instruct --port 8001
  vrag-policy serve --backend scripted --script replies.json
  vrag-policy serve --backend rule-based            # CPU-only demo policy that reads pages with tesseract
"""
from __future__ import annotations

import argparse
import sys

BACKENDS = ("transformers", "scripted", "rule-based", "vimrag-rule-based")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vrag-policy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the server", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve.add_argument("--backend", choices=BACKENDS, default="transformers")
    serve.add_argument("--model", help="hub id or local folder (transformers backend)")
    serve.add_argument("--script", help="JSON/YAML file {scripts: {key: [replies]}, default: [replies]} (scripted)")
    serve.add_argument("--served-model-name", default=None, help="name in /v1/models (default: --model or backend)")
    serve.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    serve.add_argument("--dtype", default="auto", help="auto (bf16 on GPU, fp32 on CPU), bfloat16, float16, float32")
    serve.add_argument("--max-pixels", type=int, default=512 * 28 * 28, help="image budget per image (transformers)")
    serve.add_argument("--min-pixels", type=int, default=256 * 28 * 28)
    serve.add_argument("--host", default="127.0.0.1", help="0.0.0.0 exposes it: set --api-key then")
    serve.add_argument("--port", type=int, default=8001)
    serve.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY on /v1/*")
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--search-url", default=None,
                       help="rule-based stand-ins: the search server to fetch page layouts from (default env "
                            "VRAG_SEARCH_URL; none: they OCR the images they are sent)")
    serve.add_argument("--max-body-bytes", type=int, default=64 * 2**20,
                       help="larger request bodies are refused with 413 (default 64 MiB)")
    return parser


def build_app(args: argparse.Namespace):
    """The app for parsed `serve` arguments; `SystemExit` with one clear line for unusable ones."""
    from vrag_rl.policy_server.app import create_app

    if args.backend == "transformers":
        if not args.model:
            raise SystemExit("vrag-policy: --model is required for the transformers backend")
        from vrag_rl.policy_server.transformers_backend import TransformersBackend

        try:
            backend = TransformersBackend(args.model, device=args.device, dtype=args.dtype,
                                          max_pixels=args.max_pixels, min_pixels=args.min_pixels)
        except (RuntimeError, ValueError) as exc:
            raise SystemExit(f"vrag-policy: {exc}") from None
        name = args.served_model_name or args.model
    elif args.backend == "scripted":
        if not args.script:
            raise SystemExit("vrag-policy: --script FILE is required for the scripted backend")
        from vrag_rl.policy_server.scripted import ScriptedBackend

        try:
            backend = ScriptedBackend.from_file(args.script)
        except ValueError as exc:
            raise SystemExit(f"vrag-policy: {exc}") from None
        name = args.served_model_name or "scripted"
    elif args.backend == "vimrag-rule-based":  # the CPU stand-in for VimRAG's tool protocol
        from vrag_rl.policy_server.vimrag_rule_based import VimRAGRuleBasedBackend

        backend = VimRAGRuleBasedBackend(search_url=getattr(args, "search_url", None))
        name = args.served_model_name or "vimrag-rule-based"
    else:
        from vrag_rl.policy_server.rule_based import RuleBasedBackend

        backend = RuleBasedBackend(search_url=getattr(args, "search_url", None))
        name = args.served_model_name or "rule-based"
    return create_app(backend, name, api_key=args.api_key, max_body_bytes=getattr(args, "max_body_bytes", 64 * 2**20))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        app = build_app(args)
        import uvicorn

        print(f"vrag-policy: serving {app.state.model_name!r} ({args.backend}) on http://{args.host}:{args.port}/v1",
              file=sys.stderr, flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
