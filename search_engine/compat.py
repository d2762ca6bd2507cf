"""Old path of `search_engine.infra.torchvision_shim`, kept importable for installed venvs: their .pth
file (written by scripts/install.sh before the move) imports `search_engine.compat`."""
import sys

from search_engine.infra import torchvision_shim as _moved

sys.modules[__name__] = _moved
