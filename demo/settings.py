"""Demo settings: defaults from the environment (run_demo.sh sets them), editable in the sidebar."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from vrag_rl.agent.config import MAX_PIXELS, MIN_PIXELS


@dataclass
class DemoSettings:
    policy_url: str = field(default_factory=lambda: os.environ.get("VRAG_POLICY_URL", "http://127.0.0.1:8001/v1"))
    model: str = field(default_factory=lambda: os.environ.get("VRAG_MODEL", ""))
    api_key: str = field(default_factory=lambda: os.environ.get("VRAG_API_KEY", ""))
    search_url: str = field(default_factory=lambda: os.environ.get("VRAG_SEARCH_URL", "http://127.0.0.1:8002"))
    index_dir: str = field(default_factory=lambda: os.environ.get("VRAG_INDEX_DIR", "data/index/sample"))
    upload_dir: str = field(default_factory=lambda: os.environ.get("VRAG_UPLOAD_DIR", "data/uploads"))
    # what answers, in words, when run_demo.sh started the policy itself (e.g. the rule-based stand-in)
    policy_kind: str = field(default_factory=lambda: os.environ.get("VRAG_POLICY_KIND", ""))
    max_turns: int = 10
    top_k: int = 5
    min_pixels: int = MIN_PIXELS
    max_pixels: int = MAX_PIXELS
    crop_padding: int = 56

    def episode_overrides(self) -> dict:
        """The per-question `AgentConfig` fields the sidebar sets."""
        return dict(max_turns=self.max_turns, search_top_k=self.top_k, min_pixels=self.min_pixels,
                    max_pixels=self.max_pixels, crop_padding=self.crop_padding)

    def agent_kwargs(self) -> dict:
        return dict(base_url=self.policy_url, search_url=self.search_url, model=self.model or None,
                    api_key=self.api_key or None, max_turns=self.max_turns, search_top_k=self.top_k,
                    min_pixels=self.min_pixels, max_pixels=self.max_pixels, crop_padding=self.crop_padding)

    @property
    def upload_path(self) -> Path:
        return Path(self.upload_dir)
