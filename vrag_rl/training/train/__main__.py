"""`python -m vrag_rl.training.train CONFIG.yaml [key=value ...]`: run the local trainer from a YAML run config.

Top-level keys can be overridden on the command line (`steps=100 output_dir=runs/x`; values are
parsed as YAML). `agent_type` picks the agent plugin, whose trainer runs. The search server named by
`search_url` must be running. Re-running the same
command resumes from the latest checkpoint in `output_dir`.
"""
from __future__ import annotations

import sys

import yaml


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    overrides = {}
    for item in args[1:]:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"vrag_rl.training.train: expected key=value, got {item!r}", file=sys.stderr)
            return 2
        overrides[key] = yaml.safe_load(value)
    from vrag_rl.training.train.config import load_config
    from vrag_rl.training.train.metrics import plot_runs

    try:
        config = load_config(args[0], **overrides)
        trainer = config.plugin().load("trainer")(config)  # the agent's trainer (agent_type names its plugin)
    except (OSError, ValueError, TypeError) as exc:
        print(f"vrag_rl.training.train: {exc}", file=sys.stderr)
        return 2
    records = trainer.train()
    if records:
        path = plot_runs({config.algorithm.upper(): records}, f"{config.output_dir}/curves.png")
        print(f"{len(records)} steps; last reward {records[-1]['reward']:.3f}; metrics in "
              f"{config.output_dir}/metrics.jsonl; plot {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
