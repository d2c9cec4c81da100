"""momoka.mcts: the native MCTS engine behind Momoka-Map, ETS and JERR.

See :class:`momoka.mcts.MCTS` and ``docs/search.md``.
"""

from .tree_search import MCTS, RewardRequests, root_rng_state, splitmix64_stream
from ..errors import JudgeError, RewardError, SearchError

__all__ = ["MCTS", "RewardRequests", "root_rng_state", "splitmix64_stream", "JudgeError", "RewardError", "SearchError"]
