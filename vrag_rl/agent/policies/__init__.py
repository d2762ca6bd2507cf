"""Policy adapters: the OpenAI-compatible HTTP client, an in-process transformers model, a token recorder."""
