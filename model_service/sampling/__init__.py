"""Lesson 13: logits -> the next token. The transforms (temperature, top-k, top-p, min-p) in three engines'
orders, the ranking window they run in, the draw, the per-stage summaries (pipeline.py), a plain reference of
one step to read first (reference.py), and one step sampled many times with a chi-square test (many_draws.py).
"""
