"""Oldest path of `search_engine.infra.torchvision_shim`, kept importable for installed venvs: their .pth
file imports it."""
import sys

from search_engine.infra import torchvision_shim as _moved

sys.modules[__name__] = _moved
