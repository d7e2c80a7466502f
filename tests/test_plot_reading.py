"""lab03's plot reader (grader/lab03/plotread.py) on pictures matplotlib draws here.

The grader pays plot_speedup's points for what its PNG shows: two straight lines on
log-log axes, as far apart as the table's ratio, and a legend. These tests draw the
plots a student might (styles, sizes, resolutions, markers, dashes, colours, legends
placed anywhere) and the wrong ones (linear and semi-log axes, no legend, a wrong gap),
and hand the reader hostile pictures, whose cost must stay bounded.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import math
import sys
import tracemalloc
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PLOTREAD = Path(__file__).parents[1] / "grader" / "lab03" / "plotread.py"


def _load():
    """plotread as the grader imports it: a module of its own, beside the grader file."""
    if "plotread" in sys.modules:
        return sys.modules["plotread"]
    spec = importlib.util.spec_from_file_location("plotread", PLOTREAD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["plotread"] = module
    spec.loader.exec_module(module)
    return module


plotread = _load()


def table(seed: int, exponent: float | None = None) -> tuple[dict, object]:
    """A table drawn as the grader draws its own (power laws over 3.2-4 decades of size,
    exponent 0.5-0.7 or 1.4-1.7, a constant ratio of 20x-300x) and what it must show."""
    rng = np.random.default_rng(seed)
    decades = rng.uniform(3.2, 4.0)
    sizes = np.unique(np.rint(10 ** rng.uniform(1.5, 2.5)
                              * np.logspace(0, decades, int(rng.integers(7, 11)))))
    if exponent is None:
        exponent = rng.uniform(0.5, 0.7) if rng.random() < 0.5 else rng.uniform(1.4, 1.7)
    ratio = 10 ** rng.uniform(1.3, 2.5)
    loop = 10 ** rng.uniform(-5.0, -3.0) * (sizes / sizes[0]) ** exponent
    columns = {"size": sizes, "loop_s": loop, "vectorized_s": loop / ratio,
               "ratio": np.full(sizes.size, ratio)}
    return columns, plotread.Expected(size_decades=math.log10(sizes[-1] / sizes[0]),
                                      exponent=float(exponent), gap_decades=math.log10(ratio))


def png_pixels(fig) -> np.ndarray:
    """The figure saved as a PNG and decoded, as the grader decodes the student's file."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    with Image.open(io.BytesIO(buffer.getvalue())) as image:
        return np.asarray(image.convert("RGB"))


def draw(columns, style="default", figsize=(6.4, 4.8), dpi=100, scales=("log", "log"),
         formats=("o-", "s-"), legend: dict | None = None, grid=True, title=True,
         slow="loop_s", fast="vectorized_s", **line) -> np.ndarray:
    """A plot of `columns` as a student might draw it; `legend=None` draws none."""
    with plt.style.context(style):
        fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
        ax.plot(columns["size"], columns[slow], formats[0], label="Python loop", **line)
        ax.plot(columns["size"], columns[fast], formats[1], label="NumPy", **line)
        ax.set_xscale(scales[0])
        ax.set_yscale(scales[1])
        ax.set_xlabel("array size (elements)")
        ax.set_ylabel("best time (s)")
        if title:
            ax.set_title("Sum of squares: loop vs NumPy")
        if grid:
            ax.grid(True, which="both", alpha=0.4)
        if legend is not None:
            ax.legend(**legend)
        return png_pixels(fig)


def faults(pixels: np.ndarray, expected) -> dict[str, str | None]:
    reading = plotread.read_plot(pixels)
    found = {"log_axes": plotread.bend_fault(reading),
             "gap": plotread.gap_fault(reading, expected),
             "legend": plotread.legend_fault(reading)}
    return {check: fault and fault.key for check, fault in found.items()}


NONE = {"log_axes": None, "gap": None, "legend": None}

# Correct plots: every style a student may pick, figure sizes and resolutions, markers or
# none, dashes, thick and thin lines, named colours, legends anywhere, grids and titles.
CORRECT = {
    "default": {},
    "ggplot": {"style": "ggplot"},
    "seaborn": {"style": "seaborn-v0_8"},
    "seaborn-whitegrid": {"style": "seaborn-v0_8-whitegrid", "formats": ("-", "-")},
    "seaborn-pastel": {"style": "seaborn-v0_8-pastel"},
    "dark_background": {"style": "dark_background"},
    "Solarize_Light2": {"style": "Solarize_Light2"},
    "bmh": {"style": "bmh"},
    "fivethirtyeight": {"style": "fivethirtyeight"},
    "classic": {"style": "classic"},
    "tableau-colorblind10": {"style": "tableau-colorblind10"},
    "petroff10": {"style": "petroff10"},
    "small 72 dpi": {"figsize": (4, 3), "dpi": 72},
    "tiny 50 dpi": {"figsize": (6.4, 4.8), "dpi": 50},
    "large 300 dpi": {"figsize": (8, 6), "dpi": 300},
    "wide": {"figsize": (12, 4)},
    "square": {"figsize": (5, 5)},
    "no markers, no grid, no title": {"formats": ("-", "-"), "grid": False, "title": False},
    "same markers": {"formats": ("s-", "s-")},
    "crosses": {"formats": ("x-", "+-")},
    "dashed": {"formats": ("--", "-.")},
    "dashed 300 dpi": {"formats": ("--", "-"), "dpi": 300},
    "thick, big markers": {"linewidth": 4, "markersize": 12},
    "thin": {"linewidth": 0.8},
    "named colours": {"formats": ("r-o", "b-^")},
    "magenta and cyan": {"formats": ("m-", "c-")},
    "legend lower right, small": {"legend": {"loc": "lower right", "fontsize": "small"}},
    "legend side by side": {"legend": {"loc": "upper left", "ncol": 2}},
    "legend without frame": {"legend": {"frameon": False}},
    # found by drawing random styles: a legend over a line's end, a marker at each end of
    # a legend's stroke (numpoints=2), a thin line never covering a whole pixel, triangles
    "legend upper right, small": {"figsize": (4, 3), "legend": {"loc": "upper right"}},
    "classic crosses": {"style": "classic", "formats": ("x-", "x-"), "figsize": (4, 3),
                        "dpi": 72, "linewidth": 1, "legend": {"loc": "center left"}},
    "thin crosses 80 dpi": {"formats": ("x-", "x-"), "figsize": (10, 6), "dpi": 80,
                            "linewidth": 0.8, "legend": {"loc": "lower right"}},
    "classic dashed triangles": {"style": "classic", "formats": ("^--", "^--"),
                                 "figsize": (5, 3.5), "dpi": 80, "linewidth": 3},
    "talk dashed triangles": {"style": "seaborn-v0_8-talk", "formats": ("^--", "^--"),
                              "figsize": (4, 3), "dpi": 200, "linewidth": 2},
}


@pytest.mark.parametrize("options", CORRECT.values(), ids=CORRECT.keys())
@pytest.mark.parametrize("seed", [1, 2])
def test_a_natural_log_log_plot_shows_everything(options, seed):
    columns, expected = table(seed)
    options = {"legend": {}, **options}
    assert faults(draw(columns, **options), expected) == NONE


def test_the_exponent_of_either_range_reads_alike():
    for exponent in (0.5, 0.7, 1.4, 1.7):
        columns, expected = table(7, exponent)
        assert faults(draw(columns, legend={}), expected) == NONE, exponent


def test_a_figure_legend_outside_the_axes_counts():
    columns, expected = table(3)
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.loglog(columns["size"], columns["loop_s"], "o-", label="loop")
    ax.loglog(columns["size"], columns["vectorized_s"], "o-", label="numpy")
    fig.legend(loc="outside right upper")
    assert faults(png_pixels(fig), expected) == NONE


# Wrong axes bend a power law: log_axes says which line, gap cannot be read, the legend
# is still seen.
@pytest.mark.parametrize("scales", [("linear", "linear"), ("log", "linear"), ("linear", "log")],
                         ids=["linear", "semilog-x", "semilog-y"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_axes_that_are_not_log_log_bend_the_lines(scales, seed):
    columns, expected = table(seed)
    found = faults(draw(columns, scales=scales, legend={}), expected)
    assert found["log_axes"] in ("plot_loop_bends", "plot_vectorized_bends")
    assert found["gap"] == "plot_gap_unreadable"
    assert found["legend"] is None


@pytest.mark.parametrize("formats", [("o-", "s-"), ("s-", "s-"), ("--", "-")])
@pytest.mark.parametrize("seed", [1, 2])
def test_without_a_legend_only_the_legend_is_missing(formats, seed):
    columns, expected = table(seed)
    found = faults(draw(columns, formats=formats, legend=None), expected)
    assert found == {**NONE, "legend": "plot_no_legend"}


def test_a_wrong_unit_moves_the_gap():
    columns, expected = table(5)
    columns["vectorized_us"] = columns["vectorized_s"] * 1e6
    found = faults(draw(columns, fast="vectorized_us", legend={}), expected)
    assert found == {**NONE, "gap": "plot_gap_wrong"}


def test_the_ratio_in_place_of_a_time_changes_the_gap():
    columns, expected = table(6)
    found = faults(draw(columns, fast="ratio", legend={}), expected)
    assert found == {**NONE, "gap": "plot_gap_changes"}


def test_another_table_s_picture_has_the_wrong_gap():
    """A picture made in advance: straight, a legend, but its gap in decades, read
    against its own slope, is another table's."""
    columns, _ = table(1, exponent=0.55)
    _, other = table(8, exponent=1.65)
    found = faults(draw(columns, legend={}), other)
    assert found == {**NONE, "gap": "plot_gap_wrong"}


def test_lines_drawn_from_right_to_left_on_inverted_axes_fall():
    columns, expected = table(2)
    with plt.style.context("default"):
        fig, ax = plt.subplots()
        ax.loglog(columns["size"], columns["loop_s"], label="loop")
        ax.loglog(columns["size"], columns["vectorized_s"], label="numpy")
        ax.invert_xaxis()
        ax.legend()
    assert faults(png_pixels(fig), expected) == {**NONE, "gap": "plot_lines_fall"}


def test_one_colour_for_both_lines_is_not_two_series():
    columns, expected = table(4)
    found = faults(draw(columns, formats=("o-", "s-"), color="tab:blue", legend={}), expected)
    assert found == dict.fromkeys(NONE, "plot_colours_not_found")


def test_grey_lines_are_not_read_as_series():
    columns, expected = table(4)
    found = faults(draw(columns, style="grayscale", legend={}), expected)
    assert found == dict.fromkeys(NONE, "plot_colours_not_found")


# --- hostile pictures: read within bounds, never a crash --------------------------------


def read_bounded(pixels: np.ndarray):
    """The reading of `pixels`, checked to have looked at no more pixels than allowed and
    to have allocated at most a fixed number of bytes per pixel looked at."""
    tracemalloc.start()
    try:
        reading = plotread.read_plot(pixels)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reading.analysed <= plotread.MAX_ANALYSED_PIXELS
    assert peak <= 40 * plotread.MAX_ANALYSED_PIXELS, f"{peak / 1e6:.0f} MB"
    return reading


SIDE = 4000  # the grader's MAX_PNG_SIDE: a larger header is refused before decoding


def test_a_flat_picture_at_the_size_limit_has_no_lines():
    pixels = np.empty((SIDE, SIDE, 3), dtype=np.uint8)
    pixels[...] = (230, 20, 20)  # saturated, but a background
    reading = read_bounded(pixels)
    assert (reading.colours, reading.lines, reading.legend) == (0, (), False)
    assert plotread.legend_fault(reading).key == "plot_colours_not_found"


def test_noise_at_the_size_limit_is_not_read():
    pixels = np.random.default_rng(0).integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)
    reading = read_bounded(pixels)
    assert (reading.colours, reading.lines, reading.legend) == (0, (), False)


def test_a_picture_of_short_strokes_everywhere_has_no_legend():
    """Thousands of candidate legend strokes of two colours: too busy to be a legend."""
    pixels = np.full((SIDE, SIDE, 3), 255, dtype=np.uint8)
    dashes = (np.arange(SIDE) % 90) < 50
    pixels[0::40, :][:, dashes] = (200, 30, 30)
    pixels[8::40, :][:, dashes] = (30, 30, 200)
    reading = read_bounded(pixels)
    assert reading.colours == 2 and not reading.legend


def test_a_correct_plot_at_the_size_limit_is_read_sampled():
    columns, expected = table(9)
    pixels = draw(columns, figsize=(40, 40), dpi=100, legend={})
    assert pixels.shape[:2] == (SIDE, SIDE)
    reading = read_bounded(pixels)
    assert reading.analysed < SIDE * SIDE
    assert plotread.bend_fault(reading) is None
    assert plotread.gap_fault(reading, expected) is None


def test_twenty_coloured_lines_are_read_as_two_and_judged_wrong():
    columns, expected = table(10)
    rng = np.random.default_rng(10)
    fig, ax = plt.subplots(figsize=(8, 6))
    colours = plt.get_cmap("tab20").colors
    for k, colour in enumerate(colours):
        ax.loglog(columns["size"], columns["loop_s"] * (columns["size"] ** rng.uniform(-0.6, 0.6))
                  * 10.0 ** k, color=colour, label=f"line {k}")
    ax.legend(fontsize="x-small")
    reading = read_bounded(png_pixels(fig))
    assert reading.colours == 2
    assert plotread.gap_fault(reading, expected) is not None


def test_a_mostly_empty_picture_with_a_speck_of_colour():
    pixels = np.full((300, 400, 3), 255, dtype=np.uint8)
    pixels[100:103, 200:203] = (200, 30, 30)
    reading = read_bounded(pixels)
    assert reading.lines == ()
    assert plotread.bend_fault(reading).key in ("plot_colours_not_found", "plot_lines_not_read")


def test_the_reader_imports_nothing_but_numpy_and_the_standard_library():
    """It runs on the grader's side: nothing of the worker's, nothing of the student's."""
    tree = ast.parse(PLOTREAD.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "dataclasses", "numpy"}, imported

