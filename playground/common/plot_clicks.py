"""A click on a point of a Plotly chart, sent to the server: the page writes what the point carries into a box, whose
change event runs a handler. Used by the lab's stage chart (a bar's token id: ban it, lab/ban.py) and the Forward
pass tab's patching grid (a cell's position and block: patch it, forward/intervene_patch.py).

Gradio's Plot draws a new Plotly element for every new value, so the script hooks each chart as it appears (a click
just after a redraw must not wait for a timer) and, should the chart's block itself be mounted anew, every 600 ms.
Each click's value ends in " #n", n counting the page's clicks: a second click on the same point (after the ban was
lifted, on a grid drawn anew) is a new value, so its change event fires again; `clicked_value` reads it back.
"""

from __future__ import annotations

from model_service.records import validation

# (plot_id, box_id, the JS expression of a clicked point's value: `point` is Plotly's, null for none)
CLICK_JS = """() => {
  const hook = () => {
    document.querySelectorAll("#__PLOT__ .js-plotly-plot").forEach((plot) => {
      if (plot.dataset.ntpClick === "1" || typeof plot.on !== "function") return;
      plot.dataset.ntpClick = "1";
      plot.on("plotly_click", (event) => {
        const point = event && event.points && event.points[0];
        const value = point ? (__PICK__) : null;
        const box = document.querySelector("#__BOX__ textarea, #__BOX__ input");
        if (value === undefined || value === null || !box) return;
        window.__ntpClicks = (window.__ntpClicks || 0) + 1;
        box.value = `${value} #${window.__ntpClicks}`;
        box.dispatchEvent(new Event("input", {bubbles: true}));
      });
    });
  };
  hook();
  const root = document.querySelector("#__PLOT__");
  if (root) new MutationObserver(hook).observe(root, {childList: true, subtree: true});
  setInterval(hook, 600);
}"""


def click_js(plot_id: str, box_id: str, pick: str) -> str:
    """The page's script (run once, on load) that sends a click on `plot_id`'s points to `box_id`: `pick`, a JS
    expression of Plotly's `point`, is the value (null or undefined: the click sends nothing)."""
    return CLICK_JS.replace("__PLOT__", plot_id).replace("__BOX__", box_id).replace("__PICK__", pick)


def clicked_value(field: str, text) -> str | None:
    """The value a click wrote (its " #n" taken off); None for a blank box. A script may send the bare value."""
    if validation.is_blank(text):
        return None
    return validation.text(field, text).rsplit(" #", 1)[0].strip()


__all__ = ["click_js", "clicked_value"]
