"""Charts drawn on the server as SVG text: the staff dashboard's bars and lines.

The markup is written here, whole, so a page shows it with nothing loaded from
elsewhere (no script, no stylesheet, no font): inline SVG styled by attributes. Every
text that comes from data (labels, titles) is escaped; numbers are formatted here.

    bar_chart(title="Sends per day", labels=["11-01", ...], values=[120, ...])
    line_chart(title="Bounces and complaints", labels=[...],
               series=[("Bounces", [3, ...]), ("Complaints", [0, ...])])

A chart is a fixed view box (WIDTH x HEIGHT user units) scaled by the page to its box's
width, so it fits any window. The value axis starts at 0 and ends at the largest value
(or 1, when every value is 0); the labels under the x axis are thinned to at most
MAX_X_LABELS so they never overlap.
"""

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH = 720
HEIGHT = 240
# Room for the title, the y-axis numbers and the x-axis labels.
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 28, 36
MAX_X_LABELS = 10
# The series' colours, in order (enough for the dashboard's two lines; they repeat after).
COLOURS = ("#417690", "#ba2121", "#e5a00d", "#3c8a3f")


def _plot_box() -> tuple[float, float, float, float]:
    """The plot's x, y, width and height inside the view box."""
    return LEFT, TOP, WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


def _c(value: float) -> str:
    """A coordinate, written before format_html (which escapes its arguments to text)."""
    return f"{value:.1f}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _frame(*, title: str, labels: Sequence[str], top: float, body: SafeString) -> SafeString:
    """The chart around its marks: the title, the axes, the top value and the thinned
    x labels, all escaped."""
    x, y, w, h = _plot_box()
    step = max(1, -(-len(labels) // MAX_X_LABELS))  # ceil: at most MAX_X_LABELS shown
    slot = w / max(len(labels), 1)
    ticks = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text>',
        (
            (_c(x + slot * (i + 0.5)), _c(y + h + 16), label)
            for i, label in enumerate(labels)
            if i % step == 0
        ),
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}" width="100%" preserveAspectRatio="xMinYMin meet" '
        'font-family="sans-serif" fill="currentColor">'
        "<title>{}</title>"
        '<text x="{}" y="16" font-size="13" font-weight="bold">{}</text>'
        '<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>'
        '<text x="{}" y="{}" font-size="11" text-anchor="end">0</text>'
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>'
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>'
        "{}{}</svg>",
        WIDTH, HEIGHT, title, title, x, title,
        x - 6, _c(y + 4), _number(top),
        x - 6, _c(y + h + 4),
        x, y, x, _c(y + h),
        x, _c(y + h), _c(x + w), _c(y + h),
        body, ticks,
    )  # fmt: skip


def bar_chart(*, title: str, labels: Sequence[str], values: Sequence[float]) -> SafeString:
    """One bar per label, its height proportional to its value; each bar's tooltip
    (`<title>`) gives its label and value."""
    x, y, w, h = _plot_box()
    top = max([*values, 0]) or 1
    slot = w / max(len(values), 1)
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {}</title></rect>',
        (
            (
                _c(x + slot * i + slot * 0.1),
                _c(y + h - h * value / top),
                _c(slot * 0.8),
                _c(h * value / top),
                COLOURS[0],
                label,
                _number(value),
            )
            for i, (label, value) in enumerate(zip(labels, values, strict=True))
        ),
    )
    return _frame(title=title, labels=labels, top=top, body=bars)


def line_chart(
    *, title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]]
) -> SafeString:
    """One line per series over the same labels, with a legend under the title."""
    x, y, w, h = _plot_box()
    top = max([v for _, values in series for v in values] + [0]) or 1
    slot = w / max(len(labels), 1)
    lines = []
    for n, (name, values) in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        points = " ".join(
            f"{x + slot * (i + 0.5):.1f},{y + h - h * v / top:.1f}" for i, v in enumerate(values)
        )
        lines.append(
            format_html(
                '<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>'
                '<rect x="{}" y="6" width="10" height="10" fill="{}"/>'
                '<text x="{}" y="15" font-size="11">{}</text>',
                points,
                colour,
                WIDTH - 220 + 110 * n,
                colour,
                WIDTH - 206 + 110 * n,
                name,
            )
        )
    body = format_html_join("", "{}", ((line,) for line in lines))
    return _frame(title=title, labels=labels, top=top, body=body)


# A horizontal bar chart's label column (in characters: a longer label is cut with "…").
HBAR_LABEL_CHARS = 32
HBAR_ROW = 22


def hbar_chart(*, title: str, labels: Sequence[str], values: Sequence[float]) -> SafeString:
    """One row per label (long labels such as addresses read across, cut to
    HBAR_LABEL_CHARS), its bar proportional to its value, the value at its end."""
    label_w, value_w = 230, 70
    top = max([*values, 0]) or 1
    span = WIDTH - label_w - value_w
    height = TOP + HBAR_ROW * max(len(values), 1) + 8
    rows = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="11" text-anchor="end">{}<title>{}</title></text>'
        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>'
        '<text x="{}" y="{}" font-size="11">{}</text>',
        (
            (
                label_w - 8,
                _c(TOP + HBAR_ROW * i + 14),
                label if len(label) <= HBAR_LABEL_CHARS else label[: HBAR_LABEL_CHARS - 1] + "…",
                label,
                label_w,
                _c(TOP + HBAR_ROW * i + 3),
                _c(span * value / top),
                HBAR_ROW - 6,
                COLOURS[0],
                _c(label_w + span * value / top + 4),
                _c(TOP + HBAR_ROW * i + 14),
                _number(value),
            )
            for i, (label, value) in enumerate(zip(labels, values, strict=True))
        ),
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}" width="100%" preserveAspectRatio="xMinYMin meet" '
        'font-family="sans-serif" fill="currentColor">'
        '<title>{}</title><text x="0" y="16" font-size="13" font-weight="bold">{}</text>'
        "{}</svg>",
        WIDTH,
        height,
        title,
        title,
        title,
        rows,
    )
