"""What the page's two token streams share, the Live run's and the round inspector's: a click
on a token picks its round and position, and a round drafted with another tokenizer shows its
alignment beneath."""

from __future__ import annotations

import gradio as gr

from specviz.app.tab import shown
from specviz.events import RoundEvent
from specviz.viz.tree import alignment_html

# Clicking a token in a stream asks the inspector for that round and position; each new
# value scrolls the stream to its end, where the newest round is.
TOKEN_CLICK_JS = """
element.addEventListener('click', (e) => {
  const t = e.target.closest('.tok[data-round]');
  if (t) trigger('click', {round: Number(t.dataset.round), pos: Number(t.dataset.pos)});
});
watch('value', () => {
  const s = element.querySelector('.specviz-stream');
  if (s) s.scrollTop = s.scrollHeight;
});
"""


def alignment_view(event: RoundEvent | None, meta) -> gr.HTML:
    """A round's alignment with a draft of another tokenizer, shown; hidden for any other round."""
    return shown(gr.HTML, alignment_html(event, meta) if event is not None and event.alignment else None)
