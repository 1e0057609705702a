"""Figure helpers of the course: bands clipped to their quantity's range, legends beside the
panels, and the slide-ready single-panel copy."""
import matplotlib.pyplot as plt
import numpy as np

from rlvr_lab import plotting


def test_band_bounds_clip_the_interval_not_the_mean():
    fig, ax = plotting.subplots()
    values = np.array([[0.95, 1.0, 0.2], [1.0, 1.0, 0.0], [0.7, 1.0, 0.1]])
    plotting.band(ax, np.arange(3), values, bounds=(0, 1))
    vertices = ax.collections[0].get_paths()[0].vertices
    assert vertices[:, 1].max() <= 1.0 and vertices[:, 1].min() >= 0.0
    fig2, ax2 = plotting.subplots()
    plotting.band(ax2, np.arange(3), values)
    assert ax2.collections[0].get_paths()[0].vertices[:, 1].max() > 1.0  # unclipped leaves it
    np.testing.assert_allclose(ax.lines[0].get_ydata(), values.mean(0))
    plt.close(fig)
    plt.close(fig2)


def test_legend_outside_keeps_the_panels_clear():
    fig, axes = plotting.subplots(1, 2)
    for i in range(12):
        axes[1].plot([0, 1], [i, i + 1], label=f"line {i}")
    legend = plotting.legend_outside(fig, ax=axes[1], width=0.25)
    fig.canvas.draw()
    box = legend.get_window_extent()
    for ax in axes:
        assert not ax.get_window_extent().overlaps(box)
    plt.close(fig)


def test_slide_figure_is_16_9_with_large_fonts_and_the_panel_content():
    fig, axes = plotting.subplots(1, 2)
    plotting.band(axes[1], np.arange(4), np.random.default_rng(0).random((3, 4)), label="a",
                  bounds=(0, 1))
    axes[1].set(xlabel="step", ylabel="success", title="panel")
    axes[1].legend(title="note")
    slide = plotting.slide_figure(fig, 1)
    width, height = slide.get_size_inches()
    assert abs(width / height - 16 / 9) < 0.01
    ax = slide.axes[0]
    assert ax.get_xlabel() == "step" and ax.get_title() == "panel"
    assert ax.xaxis.label.get_fontsize() >= 20
    assert len(ax.lines) == 1 and ax.get_legend().get_title().get_text() == "note"
    assert len(fig.axes) == 2  # the original is untouched
    plt.close(fig)
    plt.close(slide)


def test_slide_figure_keeps_bar_names_and_never_fails_on_odd_panels():
    fig, axes = plotting.subplots(1, 3)
    axes[0].bar([0, 1], [2, 3])
    axes[0].set_xticks([0, 1], ["SGD\nlr=1", "Adam"])
    axes[1].imshow(np.eye(3))
    axes[2].set_xscale("log")
    axes[2].plot([1, 10, 100], [0, 1, 0])
    bars = plotting.slide_figure(fig, 0)
    assert [t.get_text() for t in bars.axes[0].get_xticklabels()] == ["SGD\nlr=1", "Adam"]
    assert len(bars.axes[0].patches) == 2
    for panel in (1, 2):
        plt.close(plotting.slide_figure(fig, panel))
    plt.close(bars)
    plt.close(fig)
