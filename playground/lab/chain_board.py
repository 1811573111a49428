"""The custom chain as a board of stages a learner reorders (text-generation-webui's "sampler priority").

The chain box (tab.py) stays the one source of the chain: Generate, links and run files read it. The board under
it draws that text as a row of stage chips in their order, then the stages not in the chain. A chip moves by
dragging it (a mouse), or by its arrow buttons (a keyboard, a phone: touch screens have no HTML drag and drop);
× takes it out, a click on an unused stage adds it at the end. CHAIN_JS does each move in the browser and writes
the new order into the chain box, whose change redraws the board from the server (board_html, a pure function).
"""

from __future__ import annotations

import html
import re

import gradio as gr

from model_service.records.knobs import CHAIN_STAGES, STAGES

from ..common.i18n import tr

# the stages as the lab's controls name them, in every language
STAGE_LABELS = {name: STAGES[name][0] for name in CHAIN_STAGES}

STYLE = """<style>
#chain-board .ntp-board{display:flex;flex-wrap:wrap;gap:4px;align-items:center;margin:2px 0}
#chain-board .ntp-stage{display:inline-flex;align-items:center;gap:2px;padding:2px 4px;border-radius:6px;
  border:1px solid var(--border-color-primary);background:var(--background-fill-secondary);font-size:14px}
#chain-board .ntp-stage[draggable=true]{cursor:grab}
#chain-board .ntp-stage > span{padding:0 3px;white-space:nowrap}
#chain-board .ntp-stage.ntp-dragging{opacity:.4}
#chain-board .ntp-stage button{border:0;background:none;cursor:pointer;padding:0 3px;font-size:14px;
  color:var(--body-text-color);min-width:24px;min-height:24px}
#chain-board .ntp-stage button:disabled{opacity:.25;cursor:default}
#chain-board .ntp-unused .ntp-stage{opacity:.75;border-style:dashed}
#chain-board .ntp-board-note{font-size:13px;color:var(--body-text-color-subdued);margin:2px 0}
</style>"""

# One set of listeners on the document (the board's HTML is redrawn after every move): a button's op, or a drop,
# gives the new order, written into the chain box as "a, b, c" with an input event (Gradio then has the value).
CHAIN_JS = """() => {
  if (window.ntpChainBoard) return;
  window.ntpChainBoard = true;
  const order = () => Array.from(document.querySelectorAll("#chain-board .ntp-chain .ntp-stage"))
    .map((chip) => chip.dataset.stage);
  const write = (stages) => {
    const box = document.querySelector("#chain textarea, #chain input");
    if (!box) return;
    box.value = stages.join(", ");
    box.dispatchEvent(new Event("input", {bubbles: true}));
  };
  document.addEventListener("click", (event) => {
    const button = event.target.closest("#chain-board button[data-op]");
    if (!button) return;
    const stages = order(), name = button.dataset.stage, at = stages.indexOf(name);
    const op = button.dataset.op;
    if (op === "add" && at < 0) stages.push(name);
    else if (op === "remove" && at >= 0) stages.splice(at, 1);
    else if ((op === "left" && at > 0) || (op === "right" && at >= 0 && at < stages.length - 1)) {
      const to = op === "left" ? at - 1 : at + 1;
      [stages[at], stages[to]] = [stages[to], stages[at]];
    } else return;
    write(stages);
  });
  let dragged = null;
  document.addEventListener("dragstart", (event) => {
    const chip = event.target.closest && event.target.closest("#chain-board .ntp-chain .ntp-stage");
    if (!chip) return;
    dragged = chip.dataset.stage;
    chip.classList.add("ntp-dragging");
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", dragged);
  });
  document.addEventListener("dragover", (event) => {
    if (dragged && event.target.closest && event.target.closest("#chain-board .ntp-chain")) event.preventDefault();
  });
  document.addEventListener("dragend", () => {
    document.querySelectorAll("#chain-board .ntp-dragging").forEach((c) => c.classList.remove("ntp-dragging"));
    dragged = null;
  });
  document.addEventListener("drop", (event) => {
    const row = event.target.closest && event.target.closest("#chain-board .ntp-chain");
    if (!dragged || !row) return;
    event.preventDefault();
    const stages = order().filter((s) => s !== dragged);
    const target = event.target.closest(".ntp-stage");
    let at = stages.length;
    if (target && target.dataset.stage !== dragged) {
      const box = target.getBoundingClientRect();
      at = stages.indexOf(target.dataset.stage) + (event.clientX > box.left + box.width / 2 ? 1 : 0);
    }
    stages.splice(at, 0, dragged);
    dragged = null;
    write(stages);
  });
}"""


def stages_in(text) -> list[str]:
    """The known stage names in the chain box's text, in order, each once (an unknown word is left for Generate
    to refuse, naming it: the board draws what it can)."""
    words = re.split(r"\s*(?:,|->|→|>|;)\s*", str(text or "").strip().lower())
    names = [w.replace("-", "_") for w in words if w]
    return list(dict.fromkeys(n for n in names if n in CHAIN_STAGES))


def _button(op: str, stage: str, symbol: str, title: str, disabled: bool = False) -> str:
    return (f'<button type="button" data-op="{op}" data-stage="{stage}" title="{html.escape(title, quote=True)}" '
            f'aria-label="{html.escape(title, quote=True)}"{" disabled" if disabled else ""}>{symbol}</button>')


def board_html(text, lang: str = "en") -> str:
    """The board for the chain box's text: the chain's stages in order (each with ←, →, ×), then the others."""
    chain = stages_in(text)
    chips = []
    for i, stage in enumerate(chain):
        label = STAGE_LABELS[stage]
        chips.append(
            f'<span class="ntp-stage" draggable="true" data-stage="{stage}">'
            + _button("left", stage, "←", tr(lang, "lab.chain_board.left", stage=label), disabled=i == 0)
            + f"<span>{i + 1}. {label}</span>"
            + _button("right", stage, "→", tr(lang, "lab.chain_board.right", stage=label), disabled=i == len(chain) - 1)
            + _button("remove", stage, "×", tr(lang, "lab.chain_board.remove", stage=label))
            + "</span>")
    unused = [f'<span class="ntp-stage" data-stage="{s}">'
              + _button("add", s, f"+ {STAGE_LABELS[s]}", tr(lang, "lab.chain_board.add", stage=STAGE_LABELS[s]))
              + "</span>" for s in CHAIN_STAGES if s not in chain]
    empty = f'<span class="ntp-board-note">{tr(lang, "lab.chain_board.empty")}</span>'
    return (f'{STYLE}<div class="ntp-board-note">{tr(lang, "lab.chain_board.note")}</div>'
            f'<div class="ntp-board ntp-chain" role="list">{"".join(chips) or empty}</div>'
            f'<div class="ntp-board ntp-unused">{"".join(unused)}</div>')


def build_chain_board(chain: gr.Textbox, order: gr.Radio, language, visible: bool) -> gr.HTML:
    """The board under the chain box, shown with it (the custom order), redrawn when the box or the language
    changes. The page loads CHAIN_JS once (page.py)."""
    board = gr.HTML(board_html(chain.value), visible=visible, elem_id="chain-board")
    chain.change(board_html, [chain, language], [board], api_visibility="private", show_progress="hidden", queue=False)
    if isinstance(language, gr.Radio):  # the language and the order start other events too (test_triggers.py)
        language.change(board_html, [chain, language], [board], api_visibility="private", show_progress="hidden",
                        queue=False, trigger_mode="multiple")
    order.change(lambda o: gr.update(visible=o == "custom"), order, board, api_visibility="private",
                 show_progress="hidden", queue=False, trigger_mode="multiple")
    return board
