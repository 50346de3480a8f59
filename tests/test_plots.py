"""Reliability diagrams and risk-coverage plots: files written, contents drawn from the bins."""

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from model import metrics
from model.eval import plots


def _methods(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    y = (rng.random(n) < p).astype(int)
    return {"calibrated": (p, y), "squashed": (0.3 + 0.4 * p, y)}


@pytest.mark.parametrize("binning", ["uniform", "monotonic", "adaptive"])
@pytest.mark.parametrize("style", ["bars", "markers"])
def test_plot_reliability_writes_png_and_svg(tmp_path, binning, style):
    paths = plots.plot_reliability(_methods(), tmp_path / f"rel_{binning}_{style}", binning=binning,
                                   style=style)
    assert [p.suffix for p in paths] == [".png", ".svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    text = svg.read_text()
    assert "<svg" in text and "calibrated" in text and "squashed" in text


def test_bars_have_bin_accuracies_and_share_a_colour_bar():
    methods = _methods()
    fig = plots.reliability_figure(methods, binning="uniform", style="bars", n_bins=10)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == list(methods)
    assert len(fig.axes) == len(methods) + 1  # one shared colour bar
    for ax, (conf, labels) in zip(panels, methods.values()):
        bins = metrics.uniform_bins(conf, labels, 10)
        heights = [r.get_height() for r in ax.patches if isinstance(r, Rectangle)
                   and r.get_width() < 0.5]
        np.testing.assert_allclose(heights, bins.accuracy[bins.count > 0])
        # bars coloured by count: different counts give different colours
        colours = {tuple(np.round(r.get_facecolor(), 3)) for r in ax.patches
                   if isinstance(r, Rectangle) and r.get_width() < 0.5}
        assert len(colours) > 1
    fig.clf()


def test_marker_area_is_proportional_to_bin_size():
    conf, labels = _methods()["squashed"]
    fig = plots.reliability_figure({"m": (conf, labels)}, binning="uniform", style="markers")
    ax = fig.axes[0]
    bins = metrics.uniform_bins(conf, labels, 10)
    count = bins.count[bins.count > 0]
    sizes = next(c for c in ax.collections if isinstance(c, PathCollection)).get_sizes()
    assert np.argmax(sizes) == np.argmax(count) and np.argmin(sizes) == np.argmin(count)
    slope = np.diff(sizes) / np.diff(count)
    np.testing.assert_allclose(slope[np.isfinite(slope)], slope[np.isfinite(slope)][0])
    assert len(fig.axes) == 1  # no colour bar for markers
    fig.clf()


def test_bad_binning_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="binning"):
        plots.plot_reliability(_methods(), tmp_path / "x", binning="quantum")


def test_risk_coverage_plot(tmp_path):
    from model.eval.abstention import risk_coverage

    curves = {name: risk_coverage(c, y) for name, (c, y) in _methods().items()}
    png, svg = plots.plot_risk_coverage(curves, tmp_path / "rc")
    assert png.exists() and "AURC" in svg.read_text()


def test_a_name_with_dollar_signs_is_drawn_as_text(tmp_path):
    # system names come from files: `$\frac{a}$` raised in matplotlib's mathtext
    name = r"cost $\frac{a}$ x"
    paths = plots.plot_reliability({name: _methods()["calibrated"]}, tmp_path / "dollar", suptitle=name)
    assert [p.suffix for p in paths] == [".png", ".svg"] and paths[0].stat().st_size > 10_000


def test_the_diagonal_is_over_the_bars_and_the_legend_covers_no_panel():
    conf = np.r_[np.full(30, 0.05), np.full(30, 0.95)]  # 2 of 10 uniform bins hold the samples
    fig = plots.reliability_figure({"m": (conf, np.r_[np.zeros(30), np.ones(29), 0].astype(int))}, n_bins=10)
    ax = fig.axes[0]
    diagonal = next(line for line in ax.lines if line.get_label() == "perfect calibration")
    assert diagonal.get_zorder() > max(r.get_zorder() for r in ax.patches)
    assert ax.get_legend() is None and len(fig.legends) == 1
    fig.canvas.draw()
    legend, panel = (a.get_window_extent() for a in (fig.legends[0], ax))
    assert not legend.overlaps(panel)
    assert "uniform bins: 10 (2 with samples)" in [t.get_text().splitlines()[1] for t in ax.texts]
    fig.clf()
