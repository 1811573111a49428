"""The palette: Okabe-Ito for categories, Plotly's own Cividis for probabilities.

Both are readable with every common colour-vision deficiency. Chips, heatmaps and legends sample the
same Cividis scale, so a probability has one colour everywhere on the page.
"""

from __future__ import annotations

import functools

from plotly.colors import sample_colorscale, unlabel_rgb

BLUE, SKY, VERMILLION, GREY, INK = "#0072B2", "#56B4E9", "#D55E00", "#BBBBBB", "#333333"
GREEN = "#009E73"  # Okabe-Ito bluish green: mirostat's mu
MASKED = "#E4E4E4"  # heatmap cells with no value (the causal mask)
NO_DATA = "#E6E6E6"  # chips of a run without stage data (capture off)
PROBABILITY_SCALE = "Cividis"
# White for 0, then Okabe-Ito blues: most of a row's mass sits in a few cells, so the stops crowd
# near 0 (a linear ramp would paint every tail cell the same white).
MASS_SCALE = [[0, "#FFFFFF"], [0.02, "#EAF4FB"], [0.1, "#BFE0F5"], [0.3, SKY], [0.6, BLUE], [1, "#02304F"]]


def prob_colour(p: float) -> str:
    """The Cividis colour of a probability in [0, 1], as #rrggbb."""
    return _cividis(round(min(max(float(p), 0.0), 1.0), 3))  # 1001 shades: a chip per token stays O(1)


@functools.lru_cache(maxsize=1024)
def _cividis(p: float) -> str:
    r, g, b = (round(c) for c in unlabel_rgb(sample_colorscale(PROBABILITY_SCALE, [p])[0]))
    return f"#{r:02x}{g:02x}{b:02x}"


def css_gradient(stops: int = 10) -> str:
    """The probability scale as a CSS linear-gradient, for HTML legends."""
    parts = ", ".join(f"{prob_colour(i / (stops - 1))} {i / (stops - 1):.0%}" for i in range(stops))
    return f"linear-gradient(to right, {parts})"


def _luminance(hex_colour: str) -> float:
    """WCAG relative luminance."""
    h = hex_colour.lstrip("#")

    def lin(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(int(h[i : i + 2], 16)) for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colour(background: str) -> str:
    """Black or white, whichever contrasts more with a #rrggbb background (they tie at luminance ~0.179)."""
    return "#000000" if _luminance(background) > 0.179 else "#ffffff"
