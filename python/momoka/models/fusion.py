"""Graph rewrites that fuse a BERT encoder's decomposed operators into onnxruntime's contrib kernels.

The default embedder's graph comes from a ``torch.onnx`` (dynamo) export in
which every layer's ``scaled_dot_product_attention`` is decomposed into about
30 small operators (three projections, reshapes and transposes, ``QK^T``, two
scale multiplications, the additive padding mask, ``Softmax`` with a NaN guard,
``AV``, a transpose and a reshape back) and every GELU into five
(``Div``, ``Erf``, ``Add``, ``Mul``, ``Mul``). onnxruntime's own optimizer
fuses neither of these patterns, so on short inputs most of a forward pass is
spent in operator overhead. :func:`fuse_encoder` rewrites an fp32 graph:

- each attention block becomes one ``com.microsoft`` ``Attention`` node (packed
  ``[Wq | Wk | Wv]`` weights and biases, the same scale, and the model's
  ``attention_mask`` as its key padding mask, cast to int32 once);
- each exact (erf) GELU becomes one ``com.microsoft`` ``Gelu`` node.

The rewrite matches structure, not names, and refuses (``ModelError``) when a
block has an unexpected shape, so a graph it does not understand is never
half-rewritten. It is meant to run before
:func:`momoka.models.installer.quantize_embedder`, which turns the
``Attention`` nodes into int8 ``QAttention`` and the remaining ``MatMul``
nodes into int8 ``MatMulInteger`` (per-channel weights).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError

__all__ = ["FusionReport", "fuse_encoder"]

_MS = "com.microsoft"


@dataclass(frozen=True)
class FusionReport:
    """What :func:`fuse_encoder` replaced: fused ``attention`` blocks and ``gelu`` activations, the
    ``num_heads`` and ``hidden`` size it read from the graph, and the operator count before and after."""

    attention: int
    gelu: int
    num_heads: int
    hidden: int
    nodes_before: int
    nodes_after: int


class _Graph:
    """Producer / consumer maps and constant lookup over an ONNX graph (read-only helper)."""

    def __init__(self, graph):
        from onnx import numpy_helper  # start-up: onnx

        self.g = graph
        self.consts = {t.name: t for t in graph.initializer}
        for n in graph.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = n.attribute[0].t
        self._np = numpy_helper
        self.producer = {o: n for n in graph.node for o in n.output}
        self.consumers: dict[str, list] = {}
        for n in graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def const(self, name: str) -> np.ndarray | None:
        t = self.consts.get(name)
        return None if t is None else self._np.to_array(t)

    def scalar(self, name: str) -> float | None:
        v = self.const(name)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None

    def op(self, name: str, *op_types: str):
        """The node producing ``name`` when its type is one of ``op_types`` (default domain), else None."""
        n = self.producer.get(name)
        if n is None or n.domain not in ("", "ai.onnx") or n.op_type not in op_types:
            return None
        return n

    def only_consumer(self, name: str):
        c = self.consumers.get(name, [])
        return c[0] if len(c) == 1 else None


def _attr(node, name: str, default=None):
    from onnx import helper  # start-up: onnx

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _split_const_operand(G: _Graph, node) -> tuple[str, np.ndarray] | None:
    """For a binary node with one constant operand: (the other input, the constant), else None."""
    a, b = node.input[0], node.input[1]
    ca, cb = G.const(a), G.const(b)
    if cb is not None and ca is None:
        return a, cb
    if ca is not None and cb is None:
        return b, ca
    return None


def _projection(G: _Graph, name: str, what: str):
    """Follow ``name`` back through ``Transpose(0,2,1,3)(Reshape(Add(MatMul(x, W), b), [B, S, -1|H, D]))``.

    Returns (x, W, b, head_size, num_heads or None).
    """
    tr = G.op(name, "Transpose")
    if tr is None or list(_attr(tr, "perm", [])) != [0, 2, 1, 3]:
        raise ModelError(f"attention {what}: expected Transpose(perm=[0, 2, 1, 3]) before {name!r}")
    rs = G.op(tr.input[0], "Reshape")
    if rs is None:
        raise ModelError(f"attention {what}: expected a Reshape to heads before {tr.input[0]!r}")
    head_size, num_heads = _head_shape(G, rs.input[1], what)
    add = G.op(rs.input[0], "Add")
    split = _split_const_operand(G, add) if add is not None else None
    if split is None:
        raise ModelError(f"attention {what}: expected a bias Add before {rs.input[0]!r}")
    mm_out, bias = split
    mm = G.op(mm_out, "MatMul")
    w = G.const(mm.input[1]) if mm is not None else None
    if w is None or w.ndim != 2 or bias.shape != (w.shape[1],):
        raise ModelError(f"attention {what}: expected MatMul(x, W) with a constant 2-D W and a bias of W's width")
    return mm.input[0], w, bias, head_size, num_heads


def _head_shape(G: _Graph, shape_name: str, what: str) -> tuple[int, int | None]:
    """(head_size, num_heads or None) of a ``[B, S, -1 | H, D]`` reshape target (a constant or a Concat)."""
    c = G.const(shape_name)
    if c is not None:
        dims = [int(v) for v in c.reshape(-1)]
    else:
        cat = G.op(shape_name, "Concat")
        if cat is None:
            raise ModelError(
                f"attention {what}: the head reshape's shape {shape_name!r} is neither constant nor a Concat"
            )
        dims = []
        for i in cat.input:
            v = G.const(i)
            dims.extend([int(x) for x in v.reshape(-1)] if v is not None else [0])  # 0: a dynamic dim
    if len(dims) != 4 or dims[3] <= 0:
        raise ModelError(f"attention {what}: the head reshape is not [batch, seq, heads, head_size]: {dims}")
    return dims[3], (dims[2] if dims[2] > 0 else None)


def _strip_scale(G: _Graph, name: str) -> tuple[str, float]:
    """Follow ``name`` back through Mul-by-scalar nodes; returns (the unscaled input, the product)."""
    scale = 1.0
    while True:
        mul = G.op(name, "Mul")
        split = _split_const_operand(G, mul) if mul is not None else None
        if split is None or split[1].size != 1:
            return name, scale
        name, c = split
        scale *= float(c.reshape(-1)[0])


def _key_transposed(G: _Graph, name: str) -> str:
    """The ``[B, H, S, D]`` key that ``name`` (``[B, H, D, S]``) transposes: either ``Transpose(0,1,3,2)``
    or the exporter's ``Reshape -> Transpose(0,2,1) -> Reshape`` of the last two axes."""
    tr = G.op(name, "Transpose")
    if tr is not None and list(_attr(tr, "perm", [])) == [0, 1, 3, 2]:
        return tr.input[0]
    r2 = G.op(name, "Reshape")
    t = G.op(r2.input[0], "Transpose") if r2 is not None else None
    r1 = G.op(t.input[0], "Reshape") if t is not None else None
    if r1 is None or list(_attr(t, "perm", [])) != [0, 2, 1]:
        raise ModelError(f"attention key: expected K transposed in its last two axes before {name!r}")
    return r1.input[0]


def _mask_source(G: _Graph, mask_bias: str, graph_inputs: set[str]) -> str:
    """The graph input whose values the additive attention mask ``mask_bias`` is computed from (inputs
    reached only through ``Shape`` give sizes, not values, and are not counted)."""
    seen, todo, found = set(), [mask_bias], set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in graph_inputs:
            found.add(t)
            continue
        n = G.producer.get(t)
        if n is not None and n.op_type != "Shape":
            todo.extend(i for i in n.input if i)
    if found != {"attention_mask"}:
        raise ModelError(
            f"attention mask: expected it computed from the input 'attention_mask' alone, found {sorted(found)}"
        )
    return "attention_mask"


@dataclass
class _Block:
    x: str
    w: np.ndarray
    b: np.ndarray
    num_heads: int
    scale: float
    out: str


def _match_attention(G: _Graph, softmax, graph_inputs: set[str]) -> _Block:
    """Match the decomposed attention around one ``Softmax`` node (see the module docstring)."""
    if _attr(softmax, "axis", -1) not in (-1, 3):
        raise ModelError("attention: Softmax over an axis other than the last")
    add = G.op(softmax.input[0], "Add")
    if add is None:
        raise ModelError("attention: expected Softmax(QK^T + mask)")
    qk = mask = None
    for a, b in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        if G.op(a, "MatMul") is not None:
            qk, mask = G.op(a, "MatMul"), b
            break
    if qk is None:
        raise ModelError("attention: expected Softmax(MatMul(Q, K^T) + mask)")
    _mask_source(G, mask, graph_inputs)
    q_name, sq = _strip_scale(G, qk.input[0])
    kt_name, sk = _strip_scale(G, qk.input[1])
    k_name = _key_transposed(G, kt_name)
    # After Softmax: an optional NaN guard Where(IsNaN(p), 0, p), then MatMul(P, V).
    probs = softmax.output[0]
    nxt = G.consumers.get(probs, [])
    if len(nxt) == 2 and {n.op_type for n in nxt} == {"IsNaN", "Where"}:
        isnan = next(n for n in nxt if n.op_type == "IsNaN")
        where = next(n for n in nxt if n.op_type == "Where")
        if list(where.input) != [isnan.output[0], where.input[1], probs] or G.scalar(where.input[1]) != 0.0:
            raise ModelError("attention: unexpected guard after Softmax")
        probs = where.output[0]
    av = G.only_consumer(probs)
    if av is None or av.op_type != "MatMul" or av.input[0] != probs:
        raise ModelError("attention: expected MatMul(softmax, V) after Softmax")
    tr = G.only_consumer(av.output[0])
    if tr is None or tr.op_type != "Transpose" or list(_attr(tr, "perm", [])) != [0, 2, 1, 3]:
        raise ModelError("attention: expected Transpose(perm=[0, 2, 1, 3]) after MatMul(softmax, V)")
    rs = G.only_consumer(tr.output[0])
    if rs is None or rs.op_type != "Reshape":
        raise ModelError("attention: expected a Reshape to [batch, seq, hidden] after the heads' transpose")
    xq, wq, bq, dq, hq = _projection(G, q_name, "query")
    xk, wk, bk, dk, hk = _projection(G, k_name, "key")
    xv, wv, bv, dv, hv = _projection(G, av.input[1], "value")
    if not (xq == xk == xv):
        raise ModelError("attention: Q, K and V are projections of different inputs (not self-attention)")
    if not (wq.shape == wk.shape == wv.shape) or wq.shape[0] != wq.shape[1] or not (dq == dk == dv):
        raise ModelError(f"attention: unequal Q/K/V projections {wq.shape} {wk.shape} {wv.shape}")
    hidden = wq.shape[1]
    if hidden % dq:
        raise ModelError(f"attention: hidden size {hidden} is not a multiple of the head size {dq}")
    heads = hidden // dq
    if any(h is not None and h != heads for h in (hq, hk, hv)):
        raise ModelError(f"attention: head count {heads} disagrees with the reshape ({hq}, {hk}, {hv})")
    return _Block(
        x=xq,
        w=np.concatenate([wq, wk, wv], axis=1).astype(np.float32),
        b=np.concatenate([bq, bk, bv]).astype(np.float32),
        num_heads=heads,
        scale=sq * sk,
        out=rs.output[0],
    )


def _match_gelu(G: _Graph, erf):
    """Match ``x * (0.5 * (1 + erf(x / sqrt 2)))`` (any operand order) around an ``Erf``; returns
    (x, output name) or None when this Erf is not part of an exact GELU."""
    div = G.op(erf.input[0], "Div")
    if div is None or abs((G.scalar(div.input[1]) or 0.0) - np.sqrt(2.0)) > 1e-6:
        return None
    x = div.input[0]
    add = G.only_consumer(erf.output[0])
    if add is None or add.op_type != "Add":
        return None
    other = add.input[1] if add.input[0] == erf.output[0] else add.input[0]
    if G.scalar(other) != 1.0:
        return None
    cur, half, has_x = add.output[0], False, False
    for _ in range(2):
        mul = G.only_consumer(cur)
        if mul is None or mul.op_type != "Mul":
            return None
        other = mul.input[1] if mul.input[0] == cur else mul.input[0]
        if other == x and not has_x:
            has_x = True
        elif G.scalar(other) == 0.5 and not half:
            half = True
        else:
            return None
        cur = mul.output[0]
    return (x, cur)


def _prune(graph) -> None:
    """Drop nodes and initialisers that no graph output depends on (nodes in topological order)."""
    needed = {o.name for o in graph.output}
    keep = []
    for n in reversed(list(graph.node)):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed.update(i for i in n.input if i)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    inits = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def _toposort(graph) -> None:
    """Order nodes so that each comes after the producers of its inputs (Kahn's algorithm, stable)."""
    avail = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, out = list(graph.node), []
    while pending:
        rest = []
        for n in pending:
            if all(i in avail for i in n.input):
                out.append(n)
                avail.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            missing = sorted({i for n in rest for i in n.input if i not in avail} - {o for n in rest for o in n.output})
            raise ModelError(f"graph rewrite left a cycle or dangling inputs {missing[:5]}")
        pending = rest
    del graph.node[:]
    graph.node.extend(out)


def fuse_encoder(src: str | os.PathLike, dst: str | os.PathLike, *, expect_layers: int | None = None) -> FusionReport:
    """Fuse each attention block and exact GELU of the fp32 BERT encoder at ``src``; save to ``dst``.

    ``expect_layers``: the number of attention blocks the graph must have (every ``Softmax`` must
    belong to one, so a pattern that silently fails to match raises). Raises ModelError when a
    block does not match the expected structure or the count differs.
    """
    import onnx  # start-up: onnx
    from onnx import helper, numpy_helper, TensorProto  # start-up: onnx

    try:
        model = onnx.load(str(src))
    except Exception as exc:
        raise ModelError(f"cannot parse ONNX model {src}: {exc}") from exc
    g = model.graph
    before = len(g.node)
    G = _Graph(g)
    inputs = {i.name for i in g.input}
    softmaxes = [n for n in g.node if n.op_type == "Softmax" and n.domain in ("", "ai.onnx")]
    blocks = [_match_attention(G, s, inputs) for s in softmaxes]
    if expect_layers is not None and len(blocks) != expect_layers:
        raise ModelError(f"attention fusion found {len(blocks)} attention blocks, expected {expect_layers}")
    if not blocks:
        raise ModelError("attention fusion found no attention block (no Softmax in the graph)")
    gelus = [m for m in (_match_gelu(G, n) for n in g.node if n.op_type == "Erf") if m is not None]

    new_nodes, new_inits = [], []
    mask32 = "momoka_fused_mask_int32"
    new_nodes.append(helper.make_node("Cast", ["attention_mask"], [mask32], name="momoka_fused_mask_cast",
                                      to=TensorProto.INT32))
    # The rewritten outputs get fresh producers; the old producers of those names are removed
    # (everything else that only fed them is pruned below).
    replaced = {b.out for b in blocks} | {out for _, out in gelus}
    for i, b in enumerate(blocks):
        wn, bn = f"momoka_fused_attn{i}_qkv_weight", f"momoka_fused_attn{i}_qkv_bias"
        new_inits += [numpy_helper.from_array(b.w, wn), numpy_helper.from_array(b.b, bn)]
        new_nodes.append(helper.make_node(
            "Attention", [b.x, wn, bn, mask32], [b.out], name=f"momoka_fused_attn{i}", domain=_MS,
            num_heads=b.num_heads, scale=float(b.scale),
        ))  # fmt: skip
    for i, (x, out) in enumerate(gelus):
        new_nodes.append(helper.make_node("Gelu", [x], [out], name=f"momoka_fused_gelu{i}", domain=_MS))
    kept = [n for n in g.node if not any(o in replaced for o in n.output)]
    del g.node[:]
    g.node.extend(kept + new_nodes)
    g.initializer.extend(new_inits)
    _toposort(g)
    _prune(g)
    if not any(o.domain == _MS for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(_MS, 1))
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return FusionReport(
        attention=len(blocks), gelu=len(gelus), num_heads=blocks[0].num_heads, hidden=int(blocks[0].w.shape[0]),
        nodes_before=before, nodes_after=len(g.node),
    )
