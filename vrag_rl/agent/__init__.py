"""The VRAG agent: a multi-turn think / search / crop-zoom / answer loop over an OpenAI-compatible VLM."""
