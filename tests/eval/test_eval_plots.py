"""``momoka eval --plot`` and ``momoka eval-chunking --plot`` (momoka.eval.plots) on real results.

Tried: a real ``run_eval`` report (the first 8 SQuAD questions with evidence,
their documents only, dense and BM25, k = 1..5) drawn by ``plot_eval``: the file
is a PNG (signature) that matplotlib reads back at the figure's pixel size, and
the curves read back from the drawn lines equal the report's recall@k and
precision@k; real ``evaluate_chunker`` reports of two chunkers on the first 3
documents drawn by ``plot_chunk_lengths``: the drawn histogram counts equal
``np.histogram`` of chunk lengths computed here by chunking the same documents;
both through the CLI; the CLI without matplotlib (exit 2, the pip command,
no file) and ``--plot`` with ``--metrics`` (refused).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from momoka.cli import main  # noqa: E402
from momoka.eval import load_dataset  # noqa: E402
from momoka.eval.chunk_compare import subset  # noqa: E402
from momoka.eval.chunking import evaluate_chunker  # noqa: E402
from momoka.eval.plots import plot_chunk_lengths, plot_eval  # noqa: E402
from momoka.eval.runner import run_eval  # noqa: E402
from momoka import registry  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KS = [1, 2, 3, 4, 5]


def _read_png(path):
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return imread(path)


@pytest.fixture(scope="module")
def squad(shared_data):
    return load_dataset(shared_data / "squad_v1_dev_half_a")


@pytest.mark.models
@pytest.mark.data
def test_plot_eval_draws_the_reports_numbers(squad, tmp_path):
    report = run_eval(squad, ["dense", "bm25"], ks=KS, limit=8, documents="questions")
    png = tmp_path / "eval.png"
    drawn = plot_eval(report, png)
    assert _read_png(png).shape == (340, 800, 4)  # 8 x 3.4 inches at 100 dpi, RGBA
    expected = {}
    for name in ("dense", "bm25"):
        means = report["retrievers"][name]["item"]["means"]
        expected[name] = {"k": KS, "recall": [means[f"recall@{k}"] for k in KS],
                          "precision": [means[f"precision@{k}"] for k in KS]}
    assert drawn == expected
    # the curves are not flat copies of one another: recall grows with k, precision does not
    assert drawn["bm25"]["recall"][-1] >= drawn["bm25"]["recall"][0]
    assert drawn["dense"]["precision"] != drawn["dense"]["recall"]


@pytest.mark.data
def test_plot_chunk_lengths_draws_the_chunkers_lengths(squad, tmp_path):
    ds = subset(squad, docs=3)
    chunkers = {"fixed": registry.create("chunker", "fixed", size=60),
                "sentence": registry.create("chunker", "sentence", size=3)}
    reports = {n: evaluate_chunker(ds, c, keep_lengths=True) for n, c in chunkers.items()}
    png = tmp_path / "lengths.png"
    drawn = plot_chunk_lengths(reports, png, bins=20)
    assert _read_png(png).shape == (340, 700, 4)
    lengths = {n: [c.end - c.start for r in ds.documents for c in ch(r.to_document())] for n, ch in chunkers.items()}
    edges = np.histogram_bin_edges(np.concatenate([np.array(v) for v in lengths.values()]), bins=20)
    for name, v in lengths.items():
        assert drawn[name]["counts"] == np.histogram(v, bins=edges)[0].tolist()
        assert drawn[name]["edges"] == pytest.approx(edges.tolist())
        assert sum(drawn[name]["counts"]) == reports[name]["chunks"] == len(v)


@pytest.mark.models
@pytest.mark.data
def test_cli_plots(shared_data, tmp_path, capsys):
    data = str(shared_data / "squad_v1_dev_half_a")
    png = tmp_path / "e.png"
    rc = main(["eval", "--data", data, "--retriever", "bm25", "--limit", "5", "--documents", "questions",
               "-k", "1,2,3", "--plot", str(png)])
    assert rc == 0 and _read_png(png).shape == (340, 800, 4)
    png2 = tmp_path / "c.png"
    rc = main(["eval-chunking", "--data", data, "--chunker", "fixed,recursive", "--docs", "2", "--plot", str(png2)])
    out = capsys.readouterr().out
    assert rc == 0 and _read_png(png2).shape == (340, 700, 4)
    assert "chunker fixed" in out and "chunker recursive" in out


def test_cli_plot_errors(tmp_path, capsys, monkeypatch):
    png = tmp_path / "x.png"
    rc = main(["eval-chunking", "--data", str(tmp_path), "--metrics", "bc", "--plot", str(png)])
    assert rc == 2 and "without --metrics" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like to import
    rc = main(["eval", "--data", str(tmp_path), "--retriever", "bm25", "--plot", str(png)])
    err = capsys.readouterr().err
    assert rc == 2 and 'pip install "momoka[plot]"' in err and err.startswith("momoka: error:")
    assert not png.exists()
