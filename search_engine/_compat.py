"""Old name of `search_engine.compat`, kept importable: installed venvs have a .pth file that imports it."""
from search_engine.compat import declare_torchvision_ops, install_torchvision_hook

__all__ = ["declare_torchvision_ops", "install_torchvision_hook"]
