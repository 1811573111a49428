"""Lesson 13: logits -> the next token.

    reference.py    one step, plainly (~25 narrated lines): read this first
    transforms.py   the math of each knob: temperature, top_k, top_p, min_p (one public function each)
    pipeline.py     the chain in three engines' orders, for a batch with settings per row: every stage's distribution
    window.py       how far each row is ranked, and the cut that ranks a row wider when it must
    draw.py         the token drawn on the cumulative bar with the row's own seeded generator, and what it records
    many_draws.py   one step sampled many times, with a chi-square test
"""
