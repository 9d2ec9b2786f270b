"""The host memory budget honours the limits a process runs under: a control group's (containers, batch
schedulers) and the address-space limit (``ulimit -v``), not only the machine's ``MemAvailable``."""

from __future__ import annotations

import subprocess
import sys

from hassejax import _memory


def _write(folder, files: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cgroup_v2_limit_less_usage_without_reclaimable_cache(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job/42\n")
    _write(tmp_path / "fs" / "job" / "42", {"memory.max": "8589934592\n", "memory.current": "3221225472\n",
                                            "memory.stat": "anon 1\ninactive_file 1073741824\nactive_file 5\n"})  # fmt: skip
    assert _memory._cgroup_available(tmp_path / "fs", proc) == 8 * 2**30 - (3 - 1) * 2**30


def test_cgroup_v1_and_no_limit(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/\n0::/\n")
    _write(tmp_path / "fs" / "memory", {"memory.limit_in_bytes": str(4 * 2**30), "memory.usage_in_bytes": str(2**30),
                                        "memory.stat": "total_inactive_file 0\n"})  # fmt: skip
    assert _memory._cgroup_available(tmp_path / "fs", proc) == 3 * 2**30
    _write(tmp_path / "fs" / "memory", {"memory.limit_in_bytes": "9223372036854771712"})  # v1's "no limit"
    assert _memory._cgroup_available(tmp_path / "fs", proc) is None
    _write(tmp_path / "v2", {"memory.max": "max\n", "memory.current": "5\n"})
    assert _memory._cgroup_available(tmp_path / "v2", proc) is None
    assert _memory._cgroup_available(tmp_path / "missing", tmp_path / "missing") is None


def test_address_space_limit_caps_the_budget():
    """Under ``ulimit -v`` the budget is that limit less the process's size (MemAvailable alone passed a structured
    product the process could not allocate: a raw numpy MemoryError in a fresh-user review)."""
    code = (
        "import resource\n"
        "from hassejax import _memory\n"
        "size = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.RLIM_INFINITY))\n"
        "free = _memory.host_memory_bytes()\n"
        "assert 0 < free <= 2**30, free\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_budget_is_the_least_of_the_limits(monkeypatch):
    monkeypatch.setattr(_memory, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(_memory, "_cgroup_available", lambda: 3 * 2**30)
    monkeypatch.setattr(_memory, "_rlimit_available", lambda: None)
    assert _memory.host_memory_bytes() == 3 * 2**30
    monkeypatch.setattr(_memory, "_rlimit_available", lambda: -5)
    assert _memory.host_memory_bytes() == 0


def test_small_requests_skip_the_reading_large_ones_are_checked(monkeypatch):
    """Reading the free memory costs file reads (~0.4 ms); a short mask's product asked for it thousands of times.
    Requests under 16 MiB pass without reading it; from 16 MiB the budget is read and enforced."""
    import pytest

    from hassejax.errors import MemoryBudgetError
    from hassejax.masks import _runs

    calls = []
    monkeypatch.setattr(_runs, "host_memory_bytes", lambda: calls.append(1) or 2**20)  # 1 MiB free
    _runs.check_host_memory(16 * 2**20 - 1, "a small table", "mask")
    assert calls == []
    with pytest.raises(MemoryBudgetError, match=r"`mask`: a large table needs about 0\.02 GiB"):
        _runs.check_host_memory(16 * 2**20, "a large table", "mask")
    assert calls == [1]
