"""The LD_PRELOAD shim (C) and the helpers that locate and launch it."""
