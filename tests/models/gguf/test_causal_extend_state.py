"""CausalLM.extend_state: incremental runs on a branching KV cache equal one cache-free pass."""

from __future__ import annotations

import numpy as np
import pytest
from momoka.errors import InputError, InputTooLargeError

pytestmark = pytest.mark.models


def _last_logits_full_pass(lm, seq):
    """Next-token logits after ``seq`` from one cache-free ONNX run (no prefix state involved)."""
    n = len(seq)
    lg, _ = lm._forward(np.asarray([seq]), np.ones((1, n), np.int64), np.arange(n)[None], lm._empty_cache(1))
    return lg[0, -1].astype(np.float64)


def test_extend_state_chains_and_branches_equal_full_passes(lm_int4):
    """A prompt's state extended by one token, then by three, and a second branch from the same state: each
    state's next-token logits equal a cache-free pass over the whole sequence, and branching leaves the first
    state usable (its arrays are not changed)."""
    ids = lm_int4.encode("The river rises in the hills to the north of the town and flows south.")
    root = lm_int4.prefix_state(ids[:6])
    before = {k: v.copy() for k, v in root.kv.items()}
    a = lm_int4.extend_state(root, ids[6:7])
    a2 = lm_int4.extend_state(a, ids[7:10])
    b = lm_int4.extend_state(root, ids[10:12])  # another branch from the root
    for st, seq in ((a, ids[:7]), (a2, ids[:10]), (b, ids[:6] + ids[10:12])):
        assert st.length == len(seq)
        np.testing.assert_allclose(st.last_logits, _last_logits_full_pass(lm_int4, seq), atol=2e-3, rtol=1e-4)
    for k, v in root.kv.items():
        np.testing.assert_array_equal(v, before[k])


def test_extend_state_bad_input(lm_int4):
    """No tokens, or more than the window holds, are refused."""
    st = lm_int4.prefix_state(lm_int4.encode("Hello there."))
    with pytest.raises(InputError):
        lm_int4.extend_state(st, [])
    with pytest.raises(InputTooLargeError):
        lm_int4.extend_state(st, [1] * lm_int4.window)
