"""The server-drawn SVG charts (config.charts): well-formed, escaped, proportional, and
self-contained (nothing loaded from elsewhere)."""

import xml.etree.ElementTree as ET

from config.charts import HBAR_LABEL_CHARS, bar_chart, hbar_chart, line_chart

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '</svg><script>alert("x")</script>&'


def _parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - our own markup, parsed to check it


def _bars(svg: ET.Element) -> list[float]:
    return [
        float(r.get("height")) for r in svg.iter(f"{NS}rect") if r.find(f"{NS}title") is not None
    ]


def test_bars_are_proportional_to_their_values():
    svg = _parsed(bar_chart(title="Sends", labels=["a", "b", "c"], values=[10, 5, 0]))
    tall, half, none = _bars(svg)
    assert tall > 0 and half == tall / 2 and none == 0
    tips = [t.text for t in svg.iter(f"{NS}title")]
    assert tips == ["Sends", "a: 10", "b: 5", "c: 0"]


def test_all_zeros_draw_an_empty_chart_not_a_division_by_zero():
    svg = _parsed(bar_chart(title="Sends", labels=["a", "b"], values=[0, 0]))
    assert _bars(svg) == [0.0, 0.0]
    assert _parsed(line_chart(title="T", labels=["a"], series=[("S", [0])])).tag == f"{NS}svg"
    assert _parsed(hbar_chart(title="T", labels=[], values=[])).tag == f"{NS}svg"


def test_what_comes_from_data_is_escaped():
    for svg in (
        bar_chart(title=HOSTILE, labels=[HOSTILE], values=[1]),
        line_chart(title=HOSTILE, labels=[HOSTILE], series=[(HOSTILE, [1])]),
        hbar_chart(title=HOSTILE, labels=[HOSTILE], values=[1]),
    ):
        assert "<script>" not in svg and svg.count("</svg>") == 1
        texts = [t.text for t in _parsed(svg).iter() if t.text]
        assert HOSTILE in texts  # shown as text, whole


def test_a_line_per_series_and_long_labels_cut():
    svg = _parsed(
        line_chart(title="T", labels=["a", "b"], series=[("one", [1, 2]), ("two", [2, 0])])
    )
    assert len(list(svg.iter(f"{NS}polyline"))) == 2
    long = "someone-with-a-very-long-address@example.com"
    hbar = _parsed(hbar_chart(title="T", labels=[long], values=[3]))
    shown = [t.text for t in hbar.iter(f"{NS}text")]
    assert long[: HBAR_LABEL_CHARS - 1] + "…" in shown and "3" in shown


def test_nothing_is_loaded_from_elsewhere():
    svg = bar_chart(title="T", labels=["a"], values=[1]) + line_chart(
        title="T", labels=["a"], series=[("S", [1])]
    )
    for element in _parsed(f"<g xmlns='http://www.w3.org/2000/svg'>{svg}</g>").iter():
        assert element.tag not in (f"{NS}script", f"{NS}image", f"{NS}style", f"{NS}foreignObject")
        assert not any("href" in name for name in element.attrib)
