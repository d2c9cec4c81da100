"""Deprecated: ``momoka.models.registry`` is :mod:`momoka.models.catalog` (this alias goes in the next release)."""

from .._deprecated import alias

alias("momoka.models.registry", "momoka.models.catalog")
