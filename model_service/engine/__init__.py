"""Lesson 13.5: serving a room. The batched KV-cache runner (runner.py), one decode step told once (step.py), the
scheduler that batches every request continuously (scheduler.py), the same scheduler in a process of its own
(scheduler_process.py), the streams callers read (streams.py), incremental detokenisation and stop strings
(text_stream.py), token pieces (pieces.py) and rows per step sized for a GPU card (card.py)."""
