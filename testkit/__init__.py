"""Helpers for tests, benchmarks and offline demos: tiny random models built through the real
transformers / colpali-engine classes, and real HTTP servers on loopback ports."""
from search_engine.infra.torchvision_shim import install_torchvision_hook

install_torchvision_hook()
