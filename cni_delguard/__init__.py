"""cni-delguard: a CNI meta-plugin that lets DEL succeed when ADD never happened."""

from __future__ import annotations

__version__ = "0.1.0"

# CNI spec versions this plugin speaks (VERSION reports them; others get error code 1).
SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
# The version the plugin reports for its own output when no config version is known.
CURRENT_VERSION = "1.1.0"
PLUGIN_TYPE = "cni-delguard"
