"""`vrag-policy serve`: an OpenAI-compatible policy endpoint (transformers model, scripted, or rule-based)."""
from __future__ import annotations

import argparse


def build_app(args: argparse.Namespace):
    from vrag_rl.policy_server.app import create_app

    if args.backend == "transformers":
        if not args.model:
            raise SystemExit("--model is required for the transformers backend")
        from vrag_rl.policy_server.transformers_backend import TransformersBackend

        backend = TransformersBackend(args.model, device=args.device, dtype=args.dtype)
        name = args.served_model_name or args.model
        return create_app(backend, name, api_key=args.api_key, serialize=True)
    if args.backend == "scripted":
        if not args.script:
            raise SystemExit("--script FILE is required for the scripted backend")
        from vrag_rl.policy_server.scripted import ScriptedBackend

        return create_app(ScriptedBackend.from_file(args.script), args.served_model_name or "scripted",
                          api_key=args.api_key)
    from vrag_rl.policy_server.scripted import RuleBasedBackend

    return create_app(RuleBasedBackend(), args.served_model_name or "rule-based", api_key=args.api_key)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="vrag-policy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the server")
    serve.add_argument("--backend", choices=["transformers", "scripted", "rule-based"], default="transformers")
    serve.add_argument("--model", help="hub id or local path (transformers backend)")
    serve.add_argument("--script", help="JSON/YAML script file (scripted backend)")
    serve.add_argument("--served-model-name", default=None)
    serve.add_argument("--device", default="auto")
    serve.add_argument("--dtype", default="auto")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8001)
    serve.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    import uvicorn

    uvicorn.run(build_app(args), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
