"""The toy softmax redrawn in the page while its sliders move: no server round trip between a drag and the bars.

The lesson's arithmetic is five numbers (softmax((x + shift) / T)), so the page does it itself (TOY_JS, on each
slider's input): the figure's bars, their labels and Σ (Plotly.restyle / relayout on the figure on screen, whose
probability trace carries each row's token and logit: toy.softmax_figure's customdata), and the table with its note,
in the page's language. The same formatting as toy.py (fmt_num, fmt_exp, fmt_prob, table_markdown), written once
more in JavaScript; tests/browser/test_softmax.py reads the page's numbers against toy.softmax_table. The table goes in a box of its own over the server's
Markdown until the server's answer (toy_panel.recompute, on the sliders' change) lands with the same numbers; it alone draws what changes
the figure's shape (T = 0, an overflowing e^x, an edited table), and the JSON of the numbers.
"""

from __future__ import annotations

import json

from ..common.i18n import LANGUAGES, tr
from .toy import ACCENT, MAX_EXP_ARG, MUTED

TEXT_KEYS = ("col.probability", "note.cold", "note.hot", "note.plain", "note.shift", "fig.exp_shifted")

TOY_JS = """(shift, temperature) => {
  const texts = __TEXTS__, say = (key) => (texts[document.documentElement.lang] || texts.en)[key];
  const plot = document.querySelector('#toy-plot .js-plotly-plot');
  const s = Number(shift), t = Number(temperature);
  if (!plot || !plot.data || plot.data.length !== 2 || !(t > 0) || !isFinite(s) || !isFinite(t)) return [shift, temperature];
  const rows = plot.data[1].customdata;  // [token, logit] per row (toy.softmax_figure)
  if (!rows || !rows.length) return [shift, temperature];
  const shifted = rows.map((r) => r[1] + s), scaled = shifted.map((x) => x / t);
  if (Math.max(...scaled) > __MAX_EXP__) return [shift, temperature];  // e^x overflows: the server draws it
  let top = 0;
  shifted.forEach((x, i) => { if (x > shifted[top]) top = i; });
  const m = Math.max(...scaled), rel = scaled.map((x) => Math.exp(x - m)), total = rel.reduce((a, b) => a + b, 0);
  const probs = rel.map((r) => r / total), lse = m + Math.log(total);
  const minus = (text) => text.replace('-', '\\u2212');
  const num = (x) => { let text = x.toFixed(2); if (text.endsWith('0')) text = text.slice(0, -1);
    return text === '-0.0' || text === '-0.00' ? '0.0' : minus(text); };
  const sup = (n) => String(n).replace(/[-0-9]/g, (c) => '⁻⁰¹²³⁴⁵⁶⁷⁸⁹'['-0123456789'.indexOf(c)]);
  const g3 = (v) => { const p = Number(v.toPrecision(3)); return String(p); };
  const exp = (x) => { const digits = x / Math.LN10;
    if (digits >= -3 && digits < 6) { const v = Math.exp(x); return v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : g3(v); }
    let power = Math.floor(digits), mantissa = 10 ** (digits - power);
    if (mantissa >= 9.95) { mantissa = 1; power += 1; }
    return `${mantissa.toFixed(1)} × 10${sup(power)}`; };
  const pct = (p) => p === 0 ? '0%' : p >= 0.095 ? `${(100 * p).toFixed(0)}%` : p >= 0.0005 ? `${(100 * p).toFixed(1)}%` : '<0.1%';
  const colours = probs.map((_, i) => i === top ? '__ACCENT__' : '__MUTED__');
  const values = scaled.map((x) => Math.exp(x));
  Plotly.restyle(plot, {y: [values, probs], text: [scaled.map(exp), probs.map(pct)], 'marker.color': [colours, colours]}, [0, 1]);
  const layout = {'yaxis.range': [0, Math.max(...values) * 1.2 || 1]};
  (plot.layout.annotations || []).forEach((a, i) => {
    if (String(a.text).startsWith('Σ =')) layout[`annotations[${i}].text`] = `Σ = ${exp(lse)}`;
    if (i === 0) layout[`annotations[${i}].text`] = s ? say('fig.exp_shifted') : 'e^(x / T)';
  });
  Plotly.relayout(plot, layout);
  // the table: drawn in a box of its own over the server's Markdown (never into it: the component would not redraw
  // over an edit), shown until the server's next table lands (a language change, the answer to this move)
  const holder = document.getElementById('toy-table');
  const proses = holder ? [...holder.querySelectorAll('.prose:not(#toy-live-table)')] : [], prose = proses[0];
  if (!prose) return [shift, temperature];
  let box = document.getElementById('toy-live-table');
  if (!box) {
    box = document.createElement('div');
    box.id = 'toy-live-table';
    new MutationObserver((changes) => {
      const theirs = (c) => !box.contains(c.target) && !(c.addedNodes.length && [...c.addedNodes].every((n) => n === box));
      if (changes.some(theirs)) {
        box.hidden = true;
        box.replaceChildren();  // gone, not only hidden: the server's table is the one on the page
        holder.querySelectorAll('.prose:not(#toy-live-table)').forEach((p) => { p.style.display = ''; });
      }
    }).observe(holder, {childList: true, subtree: true, characterData: true});
  }
  box.className = prose.className;
  if (box.parentElement !== prose.parentElement) prose.parentElement.insertBefore(box, prose);
  const esc = (text) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const g = (x) => String(Number(x.toPrecision(12)));
  let arg = s ? `x ${s > 0 ? '+' : '−'} ${g(Math.abs(s))}` : 'x';
  const heads = ['token', 'logit x'], cells = [(i) => num(rows[i][1])];
  if (s) { heads.push(arg); cells.push((i) => num(shifted[i])); }
  if (t !== 1) { arg = s ? `(${arg}) / ${g(t)}` : `x / ${g(t)}`; heads.push(arg); cells.push((i) => num(scaled[i])); }
  heads.push(arg === 'x' ? 'e^x' : `e^(${arg})`); cells.push((i) => exp(scaled[i]));
  heads.push(say('col.probability')); cells.push((i) => pct(probs[i]));
  const cell = (text, i, j) => { const align = j ? 'right' : 'left'; const inner = i === top ? `<strong>${text}</strong>` : text;
    return `<td style="text-align: ${align}">${inner}</td>`; };
  const piece = (token) => esc(token.startsWith(' ') ? '␣' + token.slice(1) : token);
  let html = '<table><thead><tr>' + heads.map((h, j) => `<th style="text-align: ${j ? 'right' : 'left'}">${esc(h)}</th>`).join('')
    + '</tr></thead><tbody>';
  rows.forEach((r, i) => { html += '<tr>' + [piece(r[0]), ...cells.map((c) => esc(c(i)))].map((c, j) => cell(c, i, j)).join('') + '</tr>'; });
  const sum = ['<strong>Σ</strong>', ...Array(heads.length - 3).fill(''), `<strong>${esc(exp(lse))}</strong>`, '<strong>100%</strong>'];
  html += '<tr>' + sum.map((c, j) => `<td style="text-align: ${j ? 'right' : 'left'}">${c}</td>`).join('') + '</tr></tbody></table>';
  const parts = [];
  if (s) parts.push(say('note.shift'));
  if (t < 1) parts.push(say('note.cold').replace('{t}', g(t)));
  else if (t > 1) parts.push(say('note.hot').replace('{t}', g(t)));
  const note = parts.length ? (parts.join('; ')[0].toUpperCase() + parts.join('; ').slice(1) + '.') : say('note.plain');
  box.innerHTML = html + `<p><em>${esc(note)}</em></p>`;
  box.hidden = false;
  proses.forEach((p) => { p.style.display = 'none'; });
  return [shift, temperature];
}"""


def toy_js() -> str:
    """TOY_JS with the words it writes in both languages (the page's language picks: <html lang>)."""
    texts = {code: {key: tr(code, f"softmax.toy.{key}") for key in TEXT_KEYS} for code in LANGUAGES}
    return (TOY_JS.replace("__TEXTS__", json.dumps(texts, ensure_ascii=False)).replace("__MAX_EXP__", str(MAX_EXP_ARG))
            .replace("__ACCENT__", ACCENT).replace("__MUTED__", MUTED))


__all__ = ["TOY_JS", "toy_js"]
