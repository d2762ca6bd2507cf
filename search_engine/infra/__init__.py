"""The ground floor: project-wide infrastructure that imports nothing of the project.

Every room may import these modules; they import only the standard library and third-party packages.
They live here, not in the search engine's own modules, because the policy servers, the OpenAI policy and
the trainers need them as much as the search server does:

- `torchvision_shim` — makes PyPI's CUDA-linked torchvision importable beside a CPU-only torch;
- `devices` — one device policy (auto / cpu / cuda / mps) for every model the project loads;
- `http_guard` — HTTP server hardening (body limits, strict JSON, safe errors, bearer auth, loopback binds);
- `http_session` — the retrying asyncio HTTP session the clients (search, OpenAI policy) share;
- `malloc_tuning` — glibc heap settings that keep long-running servers' RSS flat;
- `cli_exit` — a typer app run as `main(argv) -> int` (every command line of the project is typer);
- `cli_lists` — argparse-style list options (`--methods a b c`) for typer, which click cannot parse.
- `environment` — says to activate `.venv` when the interpreter lacks the project's packages.

A test (`tests/unit/test_infra_ground_floor.py`) loads each module and fails if it pulls in any other part
of the project.
"""
