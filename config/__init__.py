"""Footnote's configuration: one typed settings object, read at the edge."""

from config.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
