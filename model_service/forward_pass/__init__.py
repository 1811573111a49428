"""Lesson 10 and 13.1 on the live model: the forward pass traced from token ids to logits at every position
(tracing.py), and the LM head as ‖h‖·‖w‖·cos (lm_head.py)."""
