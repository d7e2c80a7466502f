"""lab03's speed-up plot read from its pixels alone, as a reader would see it.

Trusted side: the grader imports this to judge a PNG it decoded itself; it imports
nothing but NumPy and never sees the figure that drew the picture. Everything here is
vectorised over the image (at most MAX_ANALYSED_PIXELS of it, sampled evenly), so a
crafted picture costs a bounded number of NumPy passes, never a Python loop per pixel.

What is read, and why each is enough:
- the two series are the two most common saturated colours that are not a background:
  matplotlib draws lines in colour and frames, text, ticks and grids in greys, in every
  style a student is likely to pick (`grayscale` aside, which the README rules out);
- each line's centre, column by column: markers and line widths are symmetric about it,
  so the centre follows the data whatever the style;
- a power law is straight on log-log axes and bends on any other, so how far the centres
  stray from their best straight line says which axes were used;
- a legend is a short horizontal stroke of each line's colour, about the same length,
  starting in the same column one above the other (or on the same row side by side:
  matplotlib draws every handle alike), off both lines: a run of a sloped line always
  touches the rows beside its ends, a marker is a block, and a flat edge of a marker
  lies on its line.

The functions at the end judge a reading against what the grader's table says; their
faults name messages of checks.toml.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Work on at most this many pixels: a larger picture is sampled every few rows and
# columns (lines in such pictures are several pixels wide, so none is lost).
MAX_ANALYSED_PIXELS = 4_000_000
# A pixel is coloured when its channels differ by at least this much (greys differ by 0).
CHROMA_MIN = 40
# A colour covering more than this share of the picture is a background, not a line;
# a picture with more than DRAWN_SHARE of it off the background is not lines on a
# background at all (noise, a photograph), and nothing is read in it.
BACKGROUND_SHARE = 0.3
DRAWN_SHARE = 0.5
# The line colours are looked for among at most this many drawn pixels, sampled evenly.
COLOUR_SAMPLE = 300_000
# A pixel belongs to a line's colour when it is that colour laid over the background
# with at least this coverage (anti-aliased edges are partly covered), and off that
# blend by no more than MEMBER_DISTANCE (in the opponent space below).
MEMBER_COVERAGE = 0.45
MEMBER_DISTANCE = 48.0
# A series' colour is its most common one taken to the fullest shade of it drawn, at most
# this many times as far from the background (the most common shade of a thin line can
# be a third of its colour).
FULLEST_MAX = 4.0
# A line's centre is read where the column is at most THIN_RATIO times as tall as its
# thinnest quarter (plus a pixel), when there are at least THIN_SHARE of such columns.
THIN_RATIO = 1.5
THIN_SHARE = 0.3
# Colours closer than this (RGB distance) are the same series' colour.
SAME_COLOUR = 60.0
# Candidate colours tried, most common first: the two series are among them.
MAX_COLOURS = 6
# A legend stroke: between these shares of the picture's width long, gaps of up to
# STROKE_GAP of the width bridged (dashes), thin (at most STROKE_DENSITY of the square
# around it filled); the two series' strokes start within STROKE_ENDS of the width (at
# least 2 pixels) of each other and differ in length by at most that or STROKE_DASH_END
# of it. A picture
# with more candidate runs than MAX_STROKES in one colour is too busy to hold a legend.
STROKE_MIN_SHARE, STROKE_MAX_SHARE = 0.01, 0.2
STROKE_GAP = 0.012
STROKE_DENSITY = 0.4
STROKE_ENDS = 0.003
STROKE_DASH_END = 0.25
MAX_STROKES = 2000
# Legends are looked for among at most this many pairs of strokes.
MAX_LEGEND_PAIRS = 64


@dataclass(frozen=True)
class Line:
    """One series as drawn: its colour and its centre's best straight line.

    Rows grow downwards, as in the picture: a rising line has a negative slope.
    `bend` is how far (pixels) the centre strays from that straight line: its 95th
    percentile over the columns read, so a marker or a stray pixel cannot make it.
    """

    colour: tuple[int, int, int]
    first: int  # first column drawn
    last: int  # last column drawn
    columns: int  # columns whose centre was read
    slope: float  # rows per column
    intercept: float  # row at column 0
    bend: float  # pixels

    @property
    def length(self) -> float:
        """The line's length in pixels, end to end."""
        return float(np.hypot(self.last - self.first, self.slope * (self.last - self.first)))

    def row_at(self, column: float) -> float:
        return self.intercept + self.slope * column


@dataclass(frozen=True)
class Reading:
    """What the picture shows: its size, how many line colours it has (two at most are
    read), the lines read (the upper one first: the slower series) and whether a legend
    was seen. Sizes are in the picture's own pixels; `analysed` is how many of them were
    looked at (a large picture is sampled)."""

    width: int
    height: int
    analysed: int
    colours: int
    lines: tuple[Line, ...]
    legend: bool


def read_plot(pixels: np.ndarray) -> Reading:
    """Read an RGB picture (height, width, 3; uint8) of two series and their legend."""
    height, width = pixels.shape[:2]
    step = max(1, int(np.ceil(np.sqrt(height * width / MAX_ANALYSED_PIXELS))))
    image = np.ascontiguousarray(pixels[::step, ::step, :3])
    shape = image.shape[:2]
    flat = image.reshape(-1, 3)
    backgrounds = _backgrounds(flat)
    background = backgrounds[0]
    drawn = np.flatnonzero(np.minimum.reduce([_distance(flat, b) for b in backgrounds]) >= 16)
    if drawn.size > DRAWN_SHARE * flat.shape[0]:
        return Reading(width=width, height=height, analysed=flat.shape[0], colours=0,
                       lines=(), legend=False)
    colours = _Colours(flat[drawn], background)
    masks = []
    for colour in colours.series(flat.shape[0]):
        mask = np.zeros(flat.shape[0], dtype=bool)
        mask[drawn[colours.members(colour, MEMBER_COVERAGE)]] = True
        masks.append(mask.reshape(shape))
    strokes = [_strokes(mask) for mask in masks]
    found = [_line(mask, own, _mean_colour(image, mask))
             for mask, own in zip(masks, strokes, strict=True)]
    handles = _legend(*(_apart(own, line) for own, line in zip(strokes, found, strict=True)),
                      shape) if len(masks) == 2 else None
    legend = handles is not None
    if handles is not None and handles.any():
        # Read again without the legend's handles: what of them is not a stroke (a
        # marker, a dash the strokes missed) is not the line.
        masks = [mask & ~handles for mask in masks]
        found = [_line(mask, own, colour.colour if colour else _mean_colour(image, mask))
                 for mask, own, colour in zip(masks, strokes, found, strict=True)]
    lines = sorted((_scaled(line, step) for line in found if line is not None),
                   key=lambda line: line.row_at((line.first + line.last) / 2))
    return Reading(width=width, height=height, analysed=flat.shape[0], colours=len(masks),
                   lines=tuple(lines), legend=legend)


# --- colours ----------------------------------------------------------------------------


def _quantised(pixels: np.ndarray) -> np.ndarray:
    """Each pixel's colour (n, 3) in 32 levels per channel, as one integer (0..32767)."""
    q = (pixels >> 3).astype(np.int32)
    return (q[:, 0] << 10) | (q[:, 1] << 5) | q[:, 2]


def _distance(pixels: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Each pixel's largest difference (n, 3) from `colour` over the three channels."""
    r, g, b = (np.abs(pixels[:, i].astype(np.int16) - colour[i]) for i in range(3))
    return np.maximum(np.maximum(r, g), b)


def _backgrounds(pixels: np.ndarray) -> list[np.ndarray]:
    """The colours (of n, 3 pixels) that each cover a tenth of the picture or more, the
    most common first: what lines are blended with at their edges (a figure and its
    axes may differ, as in the ggplot style). There is always one."""
    sample = pixels[:: max(1, pixels.shape[0] // 200_000)]
    keys = _quantised(sample)
    counts = np.bincount(keys, minlength=1 << 15)
    order = np.argsort(counts)[::-1]
    large = [key for key in order[:4] if counts[key] >= 0.1 * keys.size] or [order[0]]
    return [np.rint(sample[keys == key].mean(axis=0)).astype(np.int16) for key in large]


# Colours compared in an opponent space, brightness apart from hue, hue counted twice:
# a grey's anti-aliased edge darkens like a coloured line's but has no hue.
_OPPONENT = np.array([[1 / 3, 1 / 3, 1 / 3], [2.0, 0.0, -2.0], [-1.0, 2.0, -1.0]],
                     dtype=np.float32).T


class _Colours:
    """The drawn pixels' colours (n, 3), and which of them make each series."""

    def __init__(self, pixels: np.ndarray, background: np.ndarray) -> None:
        self.pixels = pixels
        self.keys = _quantised(pixels)
        wide = pixels.astype(np.int16)
        self.chroma = (np.maximum(np.maximum(wide[:, 0], wide[:, 1]), wide[:, 2])
                       - np.minimum(np.minimum(wide[:, 0], wide[:, 1]), wide[:, 2]))
        self.background = background
        self.offset = (wide - background).astype(np.float32) @ _OPPONENT

    def series(self, picture: int) -> list[np.ndarray]:
        """The two most common line colours in a picture of `picture` pixels: saturated,
        not a background, and each pixel counted once, for the colour it is a shade of
        (an anti-aliased edge of a blue line is not a second series)."""
        every = max(1, self.pixels.shape[0] // COLOUR_SAMPLE)
        share = every / picture  # of the picture, per sampled pixel
        left = np.flatnonzero(self.chroma[::every] >= CHROMA_MIN) * every
        found: list[tuple[int, np.ndarray]] = []
        for _ in range(MAX_COLOURS):
            if left.size == 0:
                break
            top = np.bincount(self.keys[left], minlength=1 << 15).argmax()
            colour = self._fullest(self.pixels[left[self.keys[left] == top]].mean(axis=0), left)
            shades = self.members(colour, 0.15, among=left)
            if shades.sum() * share <= BACKGROUND_SHARE:
                found.append((int(shades.sum()), colour))
            left = left[~shades]
        found.sort(key=lambda pair: -pair[0])
        distinct: list[np.ndarray] = []
        for _, colour in found:
            if all(np.linalg.norm(colour - other) > SAME_COLOUR for other in distinct):
                distinct.append(colour)
        return distinct[:2]

    def _fullest(self, colour: np.ndarray, among: np.ndarray) -> np.ndarray:
        """`colour` taken to its fullest shade among the pixels `among`: most of a thin
        sloped line is anti-aliased, so its most common colour can be lighter than the
        line's own, which its legend stroke (flat, on whole pixels) shows."""
        along, close = self._projection(colour, among)
        deeper = along[close & (along > 1.0) & (along <= FULLEST_MAX)]
        if deeper.size == 0:
            return colour
        depth = float(np.percentile(deeper, 99))
        return np.clip(self.background + depth * (colour - self.background), 0, 255)

    def _projection(self, colour: np.ndarray,
                    among: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """How far each pixel (of `among`, default all) is along the way from the
        background to `colour`, and whether it is close to that way."""
        offset = self.offset if among is None else self.offset[among]
        towards = (colour - self.background).astype(np.float32) @ _OPPONENT
        along = offset @ towards / (float(towards @ towards) or 1.0)
        off = offset - along[:, None] * towards
        return along, np.einsum("ij,ij->i", off, off) <= MEMBER_DISTANCE ** 2

    def members(self, colour: np.ndarray, coverage: float,
                among: np.ndarray | None = None) -> np.ndarray:
        """Which pixels (of `among`, default all) are `colour` laid over the background
        with at least `coverage` of it: near the segment between the two, that far along."""
        along, close = self._projection(colour, among)
        return close & (along >= coverage) & (along <= 1.25)


def _mean_colour(image: np.ndarray, mask: np.ndarray) -> tuple[int, int, int]:
    if not mask.any():
        return (0, 0, 0)
    r, g, b = (int(v) for v in np.rint(image[mask].mean(axis=0)))
    return (r, g, b)


# --- legend strokes ---------------------------------------------------------------------


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every horizontal run of the mask, gaps of up to STROKE_GAP of the width bridged (a
    dashed line's legend stroke is one stroke): its row, first and last column."""
    padded = np.zeros((mask.shape[0], mask.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    rows, starts = np.nonzero(edges == 1)
    _, ends = np.nonzero(edges == -1)  # row-major order: each run's end follows its start
    ends = ends - 1
    bridged = np.zeros(rows.size, dtype=bool)
    gap = starts[1:] - ends[:-1] - 1
    bridged[1:] = (rows[1:] == rows[:-1]) & (gap <= STROKE_GAP * mask.shape[1])
    first = np.flatnonzero(~bridged)
    last = np.append(first[1:] - 1, rows.size - 1).astype(np.intp)
    return rows[first], starts[first], ends[last]


def _strokes(mask: np.ndarray) -> np.ndarray:
    """Runs that could be a legend's stroke, as (row, first, last) rows: long enough, not
    too long, at each end the colour either both above and below or neither (a run of a
    sloped line has its neighbour on one side) and thin (a square marker's edge is flat
    too, but the marker is a block)."""
    height, width = mask.shape
    rows, starts, ends = _runs(mask)
    length = ends - starts + 1
    keep = (length >= max(5, STROKE_MIN_SHARE * width)) & (length <= STROKE_MAX_SHARE * width)
    rows, starts, ends, length = rows[keep], starts[keep], ends[keep], length[keep]
    if rows.size > MAX_STROKES:  # a picture this busy has no readable legend
        return np.zeros((0, 3), dtype=np.int64)
    padded = np.pad(mask, 1)
    # A run of a sloped line goes on above one end or below it, never both; a legend's
    # stroke has nothing beside its ends, or a marker centred on each (numpoints=2).
    one_sided = np.zeros(rows.size, dtype=bool)
    for column in (starts, ends + 2):
        one_sided |= padded[rows, column] != padded[rows + 2, column]
    rows, starts, ends, length = (rows[~one_sided], starts[~one_sided], ends[~one_sided],
                                  length[~one_sided])
    # Thin: the box as tall as the stroke is long, centred on it, is mostly empty.
    cumulative = np.pad(mask.astype(np.int32).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    top = np.clip(rows - length // 2, 0, height)
    bottom = np.clip(rows + length // 2 + 1, 0, height)
    filled = (cumulative[bottom, ends + 1] - cumulative[top, ends + 1]
              - cumulative[bottom, starts] + cumulative[top, starts])
    thin = filled <= STROKE_DENSITY * length * (bottom - top)
    return np.stack([rows[thin], starts[thin], ends[thin]], axis=1)


def _legend(first: np.ndarray, second: np.ndarray, shape: tuple[int, int]) -> np.ndarray | None:
    """Where the legend's handles are (a mask of `shape`), or None if there is no legend:
    a stroke of each colour about as long as the other, one above the other from the same
    column (no further apart than three stroke lengths) or side by side on the same row
    (no further apart than ten). The handles' area reaches an entry's spacing (or a
    stroke's length) around the pair: a handle may be longer than the stroke found in it."""
    if first.size == 0 or second.size == 0:
        return None
    height, width = shape
    ends = max(2.0, STROKE_ENDS * width)
    row, start, end = (first[:, None, i] for i in range(3))
    other_row, other_start, other_end = (second[None, :, i] for i in range(3))
    length = end - start + 1
    # a dashed stroke may end a gap early
    alike = np.abs((end - start) - (other_end - other_start)) <= np.maximum(
        ends, STROKE_DASH_END * length)
    stacked = ((np.abs(start - other_start) <= ends) & (np.abs(row - other_row) >= 2)
               & (np.abs(row - other_row) <= 3 * length))
    beside = ((np.abs(row - other_row) <= ends) & (np.abs(start - other_start) > length)
              & (np.abs(start - other_start) <= 10 * length))
    pairs = np.argwhere(alike & (stacked | beside))
    if pairs.size == 0:
        return None
    handles = np.zeros(shape, dtype=bool)
    for i, j in pairs[:MAX_LEGEND_PAIRS]:
        (row_a, start_a, end_a), (row_b, start_b, end_b) = first[i], second[j]
        reach = max(abs(int(row_a) - int(row_b)), int(end_a - start_a) + 1)
        top, bottom = min(row_a, row_b) - reach, max(row_a, row_b) + reach + 1
        left, right = min(start_a, start_b) - 2 * reach, max(end_a, end_b) + 2 * reach + 1
        handles[max(0, top):min(height, bottom), max(0, left):min(width, right)] = True
    return handles


def _apart(strokes: np.ndarray, line: Line | None) -> np.ndarray:
    """The strokes that are not on the line of their colour (a flat edge of a marker on
    it, say): their middle is off the line by more than half their length, or beyond
    its ends. The two lines are parallel, so such edges come in look-alike pairs."""
    if line is None or strokes.size == 0:
        return strokes
    middle = (strokes[:, 1] + strokes[:, 2]) / 2
    off = np.abs(strokes[:, 0] - line.row_at(middle))
    beyond = (middle < line.first) | (middle > line.last)
    return strokes[beyond | (off > np.maximum(3, (strokes[:, 2] - strokes[:, 1]) / 2))]


def _without_strokes(mask: np.ndarray, strokes: np.ndarray) -> np.ndarray:
    """The mask without its strokes and what a legend's marker may cover around them (a
    legend is not the line; an edge that was the line's costs it a few columns only).
    The boxes are painted at once: +1/-1 at their corners, summed along both axes."""
    if strokes.size == 0:
        return mask
    height, width = mask.shape
    row, start, end = strokes[:, 0], strokes[:, 1], strokes[:, 2]
    half = (end - start + 1) // 2
    top, bottom = np.clip(row - half, 0, height), np.clip(row + half + 1, 0, height)
    left, right = np.clip(start - half // 2, 0, width), np.clip(end + half // 2 + 1, 0, width)
    corners = np.zeros((height + 1, width + 1), dtype=np.int32)
    for rows, columns, sign in ((top, left, 1), (top, right, -1), (bottom, left, -1),
                                (bottom, right, 1)):
        np.add.at(corners, (rows, columns), sign)
    covered = corners.cumsum(axis=0).cumsum(axis=1)[:height, :width] > 0
    return mask & ~covered


def _line(mask: np.ndarray, strokes: np.ndarray, colour: tuple[int, int, int]) -> Line | None:
    """The series' centre, column by column, and its best straight line.

    Its strokes are left out (a legend's among them). Columns where the colour makes
    two separate runs (something else of its colour above or below the line) are not
    read: their centre is not the line's.
    """
    mask = _without_strokes(mask, strokes)
    rows, columns = np.nonzero(mask)
    if columns.size == 0:
        return None
    width = mask.shape[1]
    count = np.bincount(columns, minlength=width)
    total = np.bincount(columns, weights=rows, minlength=width)
    starts = mask & ~np.pad(mask, ((1, 0), (0, 0)))[:-1]
    runs = np.bincount(np.nonzero(starts)[1], minlength=width)
    read = np.flatnonzero((count > 0) & (runs == 1))
    if read.size < 10:
        return None
    # A marker's columns are taller than the line's and, for a triangle, not centred on
    # it, and its corners are slivers whose height changes from column to column: where
    # the line shows, only columns of its own, steady thickness are read.
    padded = np.pad(count, 2)
    steady = ((np.abs(padded[:-4] - count) <= 1) | (padded[:-4] == 0)) & (
        (np.abs(padded[4:] - count) <= 1) | (padded[4:] == 0))
    thin = read[(count[read] <= THIN_RATIO * np.quantile(count[read], 0.25) + 1)
                & steady[read]]
    first, last = int(read[0]), int(read[-1])
    if thin.size >= max(10, THIN_SHARE * read.size):
        read = thin
    x = read.astype(np.float64)
    y = total[read] / count[read]
    keep = np.ones(x.size, dtype=bool)
    for _ in range(2):  # refit without the 5% farthest columns: a stray mark, not a bend
        slope, intercept = np.polyfit(x[keep], y[keep], 1)
        off = np.abs(y - (intercept + slope * x))
        keep = off <= np.quantile(off, 0.95)
    slope, intercept = np.polyfit(x[keep], y[keep], 1)
    return Line(colour=colour, first=first, last=last, columns=int(read.size),
                slope=float(slope), intercept=float(intercept),
                bend=_bend(y - (intercept + slope * x)))


def _bend(off: np.ndarray) -> float:
    """How far a line's centre strays from its straight line, in pixels: the largest
    running median of the offsets over 2% of its columns (a stray column or a marker's
    edge moves one centre; a bend moves many neighbours alike)."""
    window = max(5, off.size // 50) | 1
    if off.size < window:
        return float(np.abs(off).max())
    running = np.median(np.lib.stride_tricks.sliding_window_view(off, window), axis=1)
    return float(np.abs(running).max())


def _scaled(line: Line, step: int) -> Line:
    """A line read on a sampled picture, in the picture's own pixels."""
    if step == 1:
        return line
    return Line(colour=line.colour, first=line.first * step, last=line.last * step,
                columns=line.columns, slope=line.slope, intercept=line.intercept * step,
                bend=line.bend * step)


# --- what the table says, and what the picture must show of it --------------------------

# A line is straight when its centre strays from its straight line by at most this share
# of its length, or BEND_PIXELS (anti-aliasing and markers move a centre by a pixel or
# two). Measured: 0.1-0.9% for log-log plots of every style; 3.5-40% for the grader's
# tables on linear, semilog-x or semilog-y axes.
BEND_SHARE = 0.02
BEND_PIXELS = 3.0
# The gap between the lines may change along them by this share of it, or GAP_PIXELS;
# read in decades (against the lines' own slope), it may be this far from the table's.
GAP_CHANGE = 0.1
GAP_PIXELS = 3.0
GAP_TOLERANCE = 0.15


@dataclass(frozen=True)
class Expected:
    """What a table whose two times follow one power law, a constant ratio apart, must
    look like: on log-log axes, two straight parallel lines as far apart (in decades of
    time) as the ratio, whose slope (decades of time per decade of size) is the
    exponent, spanning the table's decades of size."""

    size_decades: float
    exponent: float
    gap_decades: float


@dataclass(frozen=True)
class Fault:
    """Why a check fails: the message key of grader/lab03/checks.toml and its fields."""

    key: str
    params: dict[str, str]


def lines_fault(reading: Reading) -> Fault | None:
    """Whether both series were found at all (every other judgement needs them)."""
    if reading.colours < 2:
        return Fault("plot_colours_not_found", {"found": str(reading.colours)})
    if len(reading.lines) < 2:
        return Fault("plot_lines_not_read", {})
    return None


def bend_fault(reading: Reading) -> Fault | None:
    """Whether a line bends: a power law is straight on log-log axes only."""
    if (fault := lines_fault(reading)) is not None:
        return fault
    for line, key in zip(reading.lines, ("plot_loop_bends", "plot_vectorized_bends"),
                         strict=True):
        allowed = max(BEND_PIXELS, BEND_SHARE * line.length)
        if line.bend > allowed:
            return Fault(key, {"bend": f"{line.bend:.0f}", "allowed": f"{allowed:.0f}",
                               "length": f"{line.length:.0f}"})
    return None


def gap_fault(reading: Reading, expected: Expected) -> Fault | None:
    """Whether the lines keep the table's gap: the same all along them, and as many
    decades of time as the table's ratio. Decades are read against the lines themselves:
    they span the table's decades of size, and rise by the exponent per decade."""
    if (fault := lines_fault(reading)) is not None:
        return fault
    if bend_fault(reading) is not None:
        return Fault("plot_gap_unreadable", {})
    upper, lower = reading.lines
    left, right = max(upper.first, lower.first), min(upper.last, lower.last)
    if right - left < 0.5 * min(upper.last - upper.first, lower.last - lower.first):
        return Fault("plot_lines_not_over_same_sizes", {})
    start = lower.row_at(left) - upper.row_at(left)
    end = lower.row_at(right) - upper.row_at(right)
    if abs(end - start) > max(GAP_PIXELS, GAP_CHANGE * abs(start + end) / 2):
        return Fault("plot_gap_changes", {"start": f"{start:.0f}", "end": f"{end:.0f}"})
    if upper.slope >= 0 or lower.slope >= 0:
        return Fault("plot_lines_fall", {})
    # The lines span the same sizes: a legend laid over one end of a line shortens it
    # as seen, never lengthens it.
    span = max(upper.last - upper.first, lower.last - lower.first)
    columns_per_decade = span / expected.size_decades
    rows_per_decade = -(upper.slope + lower.slope) / 2 * columns_per_decade / expected.exponent
    measured = (start + end) / 2 / rows_per_decade
    if abs(measured - expected.gap_decades) > GAP_TOLERANCE * expected.gap_decades:
        return Fault("plot_gap_wrong", {"measured": f"{measured:.2f}",
                                        "expected": f"{expected.gap_decades:.2f}"})
    return None


def legend_fault(reading: Reading) -> Fault | None:
    """Whether a legend was seen beside the two lines."""
    if (fault := lines_fault(reading)) is not None:
        return fault
    return None if reading.legend else Fault("plot_no_legend", {})
