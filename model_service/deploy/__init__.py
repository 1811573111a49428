"""The service past one process: as a Ray Serve deployment (ray_serve.py), the page's client of it (remote.py),
and on a ZeroGPU Space, a GPU lease per request (zero_gpu.py)."""
