"""Per-step metrics as JSON lines, and a PNG plot of the curves (matplotlib, headless)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class MetricsLog:
    """Appends one JSON object per step; on resume, lines beyond the checkpoint's step are dropped."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def truncate_after(self, step: int) -> None:
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= step]
        self.path.write_text("".join(line + "\n" for line in kept))

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    def read(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def window_means(records: list[dict[str, Any]], key: str, fraction: float = 0.1) -> tuple[float, float]:
    """Mean of `key` over the first and the last `fraction` of the steps (at least one step each)."""
    values = [r[key] for r in records if r.get(key) is not None]
    if not values:
        raise ValueError(f"no values of {key!r}")
    n = max(1, round(len(values) * fraction))
    return sum(values[:n]) / n, sum(values[-n:]) / n


def smooth(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_runs(runs: dict[str, list[dict[str, Any]]], path: str | Path,
              keys: tuple[str, ...] = ("reward", "accuracy", "retrieval", "kl"), title: str = "",
              window: int = 5) -> Path:
    """One panel per metric, one line per run (raw, faint, and a moving average); written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.0), dpi=90)
    for ax, key in zip(axes if len(keys) > 1 else [axes], keys):
        for (name, records), color in zip(runs.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if not points:
                continue
            steps, values = zip(*points)
            ax.plot(steps, values, color=color, alpha=0.25, linewidth=1)
            ax.plot(steps, smooth(list(values), window), color=color, label=name, linewidth=2)
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    (axes[0] if len(keys) > 1 else axes).legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
