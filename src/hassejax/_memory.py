"""Free host memory, without importing JAX (private)."""

from __future__ import annotations

import os

__all__ = ["host_memory_bytes"]


def host_memory_bytes() -> int:
    """Host memory available now in bytes (``MemAvailable`` of ``/proc/meminfo``; physical memory otherwise).

    JAX-free on purpose: the structured route runs on the host and never touches a device.
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
