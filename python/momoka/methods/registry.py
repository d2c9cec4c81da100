"""Deprecated: ``momoka.methods.registry`` is :mod:`momoka.registry` (this alias goes in the next release)."""

from .._deprecated import alias

alias("momoka.methods.registry", "momoka.registry")
