"""Moved to `vrag_rl.scoring.judge` (shared with the RL reward); this path keeps old imports working."""
from vrag_rl.scoring.judge import DEFAULT_MAX_TOKENS, JUDGE_PROMPT, JudgeVerdict, LLMJudge, parse_verdict

__all__ = ["DEFAULT_MAX_TOKENS", "JUDGE_PROMPT", "JudgeVerdict", "LLMJudge", "parse_verdict"]
