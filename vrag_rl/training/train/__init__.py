"""The local trainer: GRPO / GGPO and SFT on an in-process transformers VLM (`LocalTrainer`)."""
from vrag_rl.training.train.config import TrainConfig, load_config

__all__ = ["TrainConfig", "load_config"]
