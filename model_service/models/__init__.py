"""Which models, and getting one into memory: the catalog a host may offer (catalog.py), loading a model and
its tokenizer, offline GGUF or Hub (loading.py), and loading in the background or switching it (switching.py)."""
