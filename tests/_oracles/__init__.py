"""Plain-Python oracles: slow, obvious transcriptions that the native code and the methods are checked against.

* :mod:`_oracles.mcts` -- the MCTS engine's reference search (``ReferenceMCTS``, ``SplitMix64``) and
  ``compare`` (an engine's trees against reference searches, node for node);
* :mod:`_oracles.chunking` -- the classic chunkers' tokenisation and spans;
* :mod:`_oracles.moc` -- Meta-Chunking's PPL minima, merges and MSP splits;
* :mod:`_oracles.jerr` -- JERR's exact and near deduplication (SimHash);
* :mod:`_oracles.jerr_alg1` -- JERR's Algorithm 1, line by line from the paper;
* :mod:`_oracles.embedders` -- a hashed bag-of-words stand-in embedder (no model files);
* :mod:`_oracles.qwen2` -- a tiny planted ``qwen2`` GGUF and its float64 numpy forward pass.

The tests import them as ``_oracles`` (``tests/conftest.py`` puts ``tests/`` on ``sys.path``); the
benchmarks under ``bench/`` do the same.
"""
