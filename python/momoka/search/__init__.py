"""Deprecated: ``momoka.search`` is :mod:`momoka.mcts` (this alias goes in the next release)."""

from .._deprecated import alias

alias("momoka.search", "momoka.mcts", {"mcts": "tree_search"})
