"""Build the native decode step (native/llama_step.c) once per machine and load it.

The C file (and the header it includes) is compiled by the host's own C compiler (cc, gcc or clang) with -O3 -march=native, so its products use
the vector unit this CPU has; the library is kept in the cache directory (env.cache_dir(), outside the repository)
under a name that hashes the source, the compiler, the flags and the CPU, so a later start loads it in
milliseconds, a changed source or another CPU builds its own, and a cache copied to another machine never runs
instructions its CPU lacks. A machine with no compiler, or a build that fails, keeps transformers' step: the
reason is returned for the log and the model line.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .. import env, limits
from .machine import cpu_identity
from .native_layout import Matrix, Model, layout_mismatch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("native") / "llama_step.c"
COMPILERS = ("cc", "gcc", "clang")
# tried in turn: the CPU's own vector unit (-march on x86 and GCC, -mcpu on Apple's clang), then the baseline
ATTEMPTS = (("-march=native",), ("-mcpu=native",), ())
FLAGS = ("-O3", "-std=c11", "-ffp-contract=fast", "-fPIC", "-shared", "-pthread")  # contract: a*b+c as one FMA


class BuildError(RuntimeError):
    """The native step could not be built or loaded here; the message says why, in words for the log."""


def _compiler() -> str:
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    raise BuildError(f"no C compiler on PATH (looked for {', '.join(COMPILERS)})")


def _identity(compiler: str) -> str:
    """The compiler's version line and this CPU's model and flags: what the library's machine code depends on."""
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"{compiler} --version failed: {e}") from e
    return (version.splitlines()[0] if version else compiler) + cpu_identity()


def library_path(compiler: str, extra: tuple[str, ...]) -> Path:
    digest = hashlib.sha256()
    sources = [path.read_bytes() for path in sorted(SOURCE.parent.iterdir()) if path.suffix in (".c", ".h")]
    for part in (*sources, _identity(compiler).encode(), " ".join(FLAGS + extra).encode()):
        digest.update(part)
    return env.cache_dir() / "native" / f"llama_step-{digest.hexdigest()[:16]}.so"


def build() -> tuple[Path, float]:
    """The compiled library (built now if this machine has none yet) and the seconds building took (0: cached)."""
    compiler = _compiler()
    failures = []
    for extra in ATTEMPTS:
        path = library_path(compiler, extra)
        if path.exists():
            return path, 0.0
        started = time.perf_counter()
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(handle)
        command = [compiler, *FLAGS, *extra, "-o", temporary, str(SOURCE), "-lm"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limits.NATIVE_BUILD_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            done, failures = None, [*failures, f"{' '.join(command)}: {e}"]
        if done is not None and done.returncode == 0:
            os.replace(temporary, path)  # atomic: another process building beside this one loads either copy
            return path, time.perf_counter() - started
        if done is not None:
            failures.append(f"{' '.join(extra) or 'no -march'}: {(done.stderr or '').strip().splitlines()[-1:]}")
        Path(temporary).unlink(missing_ok=True)
    raise BuildError(f"{compiler} could not build {SOURCE.name}: " + "; ".join(failures))


def load() -> tuple[ctypes.CDLL, float]:
    """The library with its functions' signatures, checked against this module's view of its records, and the
    seconds a build took (0: it was cached). Raises BuildError."""
    path, seconds = build()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise BuildError(f"could not load {path}: {e}") from e
    lib.ntp_step.argtypes = [ctypes.POINTER(Model), ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p]
    lib.ntp_step.restype = ctypes.c_int
    lib.ntp_step_rows.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.ntp_step_rows.restype = ctypes.c_int
    lib.ntp_product.argtypes = [ctypes.POINTER(Matrix), ctypes.c_void_p, ctypes.c_void_p]
    lib.ntp_product.restype = None
    lib.ntp_scratch_floats.argtypes = [ctypes.POINTER(Model)]
    lib.ntp_scratch_floats.restype = ctypes.c_int64
    lib.ntp_rank.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p]
    lib.ntp_rank.restype = ctypes.c_int
    lib.ntp_threads.argtypes = [ctypes.c_int]
    lib.ntp_threads.restype = ctypes.c_int
    lib.ntp_layout.argtypes = [ctypes.c_int]
    lib.ntp_layout.restype = ctypes.c_int64
    mismatch = layout_mismatch(lib)
    if mismatch:
        raise BuildError(mismatch)
    if seconds:
        log.info("built the native decode step in %.1f s: %s", seconds, path)
    return lib, seconds


__all__ = ["BuildError", "build", "library_path", "load"]
