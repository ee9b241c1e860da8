"""xce's scheduler core."""

from xce_core._errors import PluginError, ResReqSyntaxError, XceError

__all__ = ["PluginError", "ResReqSyntaxError", "XceError"]
