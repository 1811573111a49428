"""What this machine's CPU is, as a key for what is kept between starts (a compiled step, a measured choice): a
cache copied to another machine, or read after a CPU change, is never taken for this one's."""

from __future__ import annotations

import functools
import platform


@functools.cache
def cpu_identity() -> str:
    """The machine's architecture and processor, and on Linux its CPU's model name and flags."""
    cpu = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu += "".join(sorted({line for line in info if line.startswith(("model name", "flags"))}))
    except OSError:
        pass  # not Linux: the machine name and processor stand for the CPU
    return cpu


__all__ = ["cpu_identity"]
