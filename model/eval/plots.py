"""Reliability diagrams and risk-coverage curves, written as PNG and SVG files (matplotlib Agg).

Plotting is a side effect kept at the edge: the binning comes from ``model.metrics`` and the
curves from ``model.eval.abstention``; this module only draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: tests, CI and servers have no display

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, NullFormatter

from model import metrics
from model.eval.abstention import curve_area

BINNINGS = ("uniform", "monotonic", "adaptive")
STYLES = ("bars", "markers")
FORMATS = ("png", "svg")
CMAP = "viridis"

# titles and legends name systems read from files: a `$` there is text, not mathtext (which
# raised on `$\frac{a}$`)
plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "text.parse_math": False})

Scores = tuple[Sequence[float], Sequence[int]]  # (confidences, labels)


def compute_bins(confidences, labels, binning: str = "uniform", n_bins: int = 10,
                 min_bin_size: int = 10, max_bin_size: int = 1000) -> metrics.Bins:
    """The bins a diagram shows: one of ``BINNINGS``."""
    if binning == "uniform":
        return metrics.uniform_bins(confidences, labels, n_bins)
    if binning == "adaptive":
        return metrics.adaptive_bins(confidences, labels, n_bins)
    if binning == "monotonic":
        return metrics.monotonic_bins(confidences, labels, min_bin_size, max_bin_size)
    raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")


def _bar_edges(bins: metrics.Bins, binning: str) -> tuple[np.ndarray, np.ndarray]:
    """x-extent of each bar: the bin edges for uniform bins; for data-driven bins, the midpoints
    between neighbouring bins (bars tile the data's range without gaps or overlaps), from the
    smallest to the largest confidence, each bar at least 0.004 wide so that it stays visible."""
    if binning == "uniform":
        return bins.lower, bins.upper
    cuts = (bins.upper[:-1] + bins.lower[1:]) / 2.0
    left = np.concatenate([[bins.lower[0]], cuts])
    right = np.concatenate([cuts, [bins.upper[-1]]])
    return left, np.maximum(right, left + 0.004)


def draw_reliability(ax, bins: metrics.Bins, binning: str = "uniform", style: str = "bars",
                     norm=None, title: str | None = None, max_count: int | None = None):
    """Draw one reliability diagram on ``ax``; returns the mappable for a colour bar (bars) or
    ``None`` (markers).

    bars: one bar per non-empty bin from its lower to its upper edge, as high as the bin's
    accuracy and coloured by its number of samples, with a dot at (average confidence,
    accuracy). markers: one dot per bin at (average confidence, accuracy), its area
    proportional to the bin's number of samples (as in the SCF paper).
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    filled = bins.count > 0
    count = bins.count[filled]
    # over the bars (a bar hid the diagonal below its top), under the dots
    ax.plot([0, 1], [0, 1], ls="--", color="0.4", lw=1, label="perfect calibration", zorder=2.5)
    mappable = None
    if style == "bars":
        norm = norm or LogNorm(vmin=1, vmax=max(2, int(count.max())))
        left, right = _bar_edges(bins, binning)
        colours = plt.get_cmap(CMAP)(norm(count))
        ax.bar(left[filled], bins.accuracy[filled], width=(right - left)[filled], align="edge",
               color=colours, edgecolor="white", lw=0.6 if binning == "uniform" else 0.2, zorder=2,
               label="accuracy (bar)")
        ax.scatter(bins.mean_confidence[filled], bins.accuracy[filled], s=14, color="crimson",
                   zorder=3, clip_on=False, label="(avg confidence, accuracy)")
        mappable = plt.cm.ScalarMappable(norm=norm, cmap=CMAP)
    else:
        biggest = max_count or int(count.max())
        sizes = 20 + 480 * count / biggest
        ax.plot(bins.mean_confidence[filled], bins.accuracy[filled], color="tab:blue", lw=1,
                alpha=0.6, zorder=2)
        ax.scatter(bins.mean_confidence[filled], bins.accuracy[filled], s=sizes,
                   color="tab:blue", alpha=0.7, edgecolor="white", zorder=3, clip_on=False,
                   label="bin (area ∝ samples)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.grid(alpha=0.25, lw=0.5)
    if title:
        ax.set_title(title)
    shown = f"{binning} bins: {filled.size}" + (f" ({int(filled.sum())} with samples)" if not filled.all() else "")
    ax.text(0.03, 0.97, f"CE = {bins.calibration_error:.3f}\n{shown}\n"
            f"n = {int(bins.count.sum())}", transform=ax.transAxes, va="top", fontsize=9,
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9})
    return mappable


def save_figure(fig, path_stem: Path | str, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``fig`` as ``<path_stem>.<fmt>`` for each format, close it, return the paths."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        fig.savefig(path, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


def reliability_figure(methods: Mapping[str, Scores], binning: str = "uniform",
                       style: str = "bars", n_bins: int = 10, min_bin_size: int = 10,
                       max_bin_size: int = 1000, suptitle: str | None = None):
    """Several methods' reliability diagrams side by side, sharing one colour scale.

    ``methods`` maps a display name to (confidences, labels). Returns the matplotlib figure.
    """
    if not methods:
        raise ValueError("no methods to plot")
    all_bins = {name: compute_bins(c, y, binning, n_bins, min_bin_size, max_bin_size)
                for name, (c, y) in methods.items()}
    max_count = max(int(b.count.max()) for b in all_bins.values())
    norm = LogNorm(vmin=1, vmax=max(2, max_count))
    n = len(all_bins)
    fig, axes = plt.subplots(1, n, figsize=(3.8 * n + (0.8 if style == "bars" else 0), 4.2),
                             squeeze=False, constrained_layout=True)
    mappable = None
    for ax, (name, bins) in zip(axes[0], all_bins.items()):
        mappable = draw_reliability(ax, bins, binning, style, norm=norm, title=name,
                                    max_count=max_count)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    if mappable is not None:
        bar = fig.colorbar(mappable, ax=list(axes[0]), shrink=0.85, label="samples in bin")
        # counts as plain numbers: with mathtext off (above) a log axis's `10^2` would print as TeX
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        bar.ax.yaxis.set_minor_formatter(NullFormatter())
    # below the panels: inside one, it hid the bars of confident bins
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8,
               frameon=False)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def plot_reliability(methods: Mapping[str, Scores], path_stem: Path | str, binning: str = "uniform",
                     style: str = "bars", n_bins: int = 10, min_bin_size: int = 10,
                     max_bin_size: int = 1000, suptitle: str | None = None,
                     formats: Sequence[str] = FORMATS) -> list[Path]:
    """``reliability_figure`` written to ``<path_stem>.png`` and ``.svg``; returns the paths."""
    fig = reliability_figure(methods, binning, style, n_bins, min_bin_size, max_bin_size,
                             suptitle)
    return save_figure(fig, path_stem, formats)


def plot_risk_coverage(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                       path_stem: Path | str, title: str | None = None,
                       formats: Sequence[str] = FORMATS) -> list[Path]:
    """Risk-coverage curves: error rate of the answered items vs the fraction answered.

    ``curves`` maps a method name to (coverage, risk) arrays, e.g. from
    ``model.eval.abstention.risk_coverage``. The legend gives each curve's AURC (lower is better).
    """
    fig, ax = plt.subplots(figsize=(5.2, 4.2), constrained_layout=True)
    for name, (coverage, risk) in curves.items():
        coverage, risk = np.asarray(coverage, float), np.asarray(risk, float)
        area = curve_area(coverage, risk)
        ax.plot(coverage, risk, lw=1.6, label=f"{name} (AURC {area:.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("coverage (fraction answered)")
    ax.set_ylabel("risk (error rate of answered)")
    ax.grid(alpha=0.25, lw=0.5)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return save_figure(fig, path_stem, formats)
