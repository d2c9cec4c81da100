"""Plots of evaluation reports (extra ``momoka[plot]``: matplotlib).

* :func:`plot_eval`: recall@k and precision@k against k, one curve per
  retriever (and per view where a retriever's distinct-chunk view differs from
  its item view), from a :func:`momoka.eval.runner.run_eval` report
  (``momoka eval --plot FILE.png``);
* :func:`plot_chunk_lengths`: the chunk-length distribution (characters) of
  each chunker, from :func:`momoka.eval.chunking.evaluate_chunker` reports made
  with ``keep_lengths=True`` (``momoka eval-chunking --plot FILE.png``).

Both draw with matplotlib's object API on an Agg canvas (no pyplot state, no
display needed), write a PNG and return the data of the drawn artists, read
back from the figure, so callers and tests can check what was drawn.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError

__all__ = ["eval_series", "plot_chunk_lengths", "plot_eval"]

_DPI = 100


def _figure(width: float, height: float):
    from .._extras import require  # start-up: momoka._extras

    require("matplotlib", "plot", "plotting (--plot)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # optional: plot (matplotlib)
    from matplotlib.figure import Figure  # optional: plot (matplotlib)

    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | os.PathLike) -> None:
    fig.tight_layout()
    try:
        fig.savefig(os.fspath(path), format="png", dpi=_DPI)
    except OSError as exc:
        raise InputError(f"cannot write the plot to {path}: {exc.strerror or exc}") from None


def eval_series(report: dict) -> dict[str, dict[str, list]]:
    """``{label: {"k": [...], "recall": [...], "precision": [...]}}`` of a ``run_eval`` report.

    The label is the retriever's name for its item view, and ``"NAME (chunks)"``
    for its distinct-chunk view where its curves differ (composite items).
    """
    ks = sorted(int(k) for k in report["ks"])
    out: dict[str, dict[str, list]] = {}
    for name, row in report["retrievers"].items():
        views = [("item", name)]
        drawn = [f"{m}@{k}" for m in ("recall", "precision") for k in ks]
        if any(row["chunk"]["means"][key] != row["item"]["means"][key] for key in drawn):
            views.append(("chunk", f"{name} (chunks)"))
        for view, label in views:
            means = row[view]["means"]
            out[label] = {"k": ks, "recall": [float(means[f"recall@{k}"]) for k in ks],
                          "precision": [float(means[f"precision@{k}"]) for k in ks]}
    return out


def plot_eval(report: dict, path: str | os.PathLike, *, title: str | None = None) -> dict[str, dict[str, list]]:
    """Draw recall@k and precision@k per retriever to the PNG ``path``; returns the drawn series.

    The returned dict has :func:`eval_series`'s shape, read back from the
    plotted lines.
    """
    series = eval_series(report)
    fig = _figure(8.0, 3.4)
    axes = {"recall": fig.add_subplot(1, 2, 1), "precision": fig.add_subplot(1, 2, 2)}
    for label, s in series.items():
        style = "--" if label.endswith("(chunks)") else "-"
        for metric, ax in axes.items():
            ax.plot(s["k"], s[metric], style, marker="o", markersize=3, label=label)
    ks = sorted(int(k) for k in report["ks"])
    for metric, ax in axes.items():
        ax.set_xlabel("k")
        ax.set_ylabel(f"{metric}@k")
        ax.set_xticks(ks)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes["recall"].legend(fontsize=8, loc="lower right")
    fig.suptitle(title or f"{report['data']}: {report['n_questions']} questions, {report['n_chunks']} chunks, "
                 f"scope {report['scope']}", fontsize=9)
    _save(fig, path)
    drawn: dict[str, dict[str, list]] = {}
    for metric, ax in axes.items():
        for line in ax.get_lines():
            d = drawn.setdefault(line.get_label(), {"k": [int(x) for x in line.get_xdata()]})
            d[metric] = [float(y) for y in line.get_ydata()]
    return drawn


def plot_chunk_lengths(reports: dict[str, dict], path: str | os.PathLike, *, bins: int = 40,
                       title: str | None = None) -> dict[str, dict[str, list]]:
    """Draw the chunk-length histogram (characters) of each chunker to the PNG ``path``.

    ``reports`` maps a chunker name to its ``evaluate_chunker(..., keep_lengths=True)``
    report. All chunkers share the bins (``bins`` equal bins over the lengths
    seen). Returns ``{name: {"counts": [...], "edges": [...]}}`` read back
    from the drawn histograms.
    """
    lengths = {}
    for name, rep in reports.items():
        if "char_lengths" not in rep:
            raise ConfigError(f"the report of {name!r} has no chunk lengths (evaluate_chunker(..., keep_lengths=True))")
        lengths[name] = np.asarray(rep["char_lengths"], dtype=np.int64)
    allv = np.concatenate([v for v in lengths.values()]) if lengths else np.zeros(0)
    if allv.size == 0:
        raise ConfigError("no chunks to plot")
    edges = np.histogram_bin_edges(allv, bins=bins)
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    drawn: dict[str, dict[str, list]] = {}
    for name, v in lengths.items():
        counts, got_edges, _ = ax.hist(v, bins=edges, histtype="step", linewidth=1.4,
                                       label=f"{name}: {v.size} chunks, mean {v.mean():.0f}, median {np.median(v):.0f}")
        drawn[name] = {"counts": [int(c) for c in counts], "edges": [float(e) for e in got_edges]}
    ax.set_xlabel("chunk length (characters)")
    ax.set_ylabel("chunks")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    first = next(iter(reports.values()))
    ax.set_title(title or f"{first['dataset']}: {first['documents']} documents", fontsize=9)
    _save(fig, path)
    return drawn
