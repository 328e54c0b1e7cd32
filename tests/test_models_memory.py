"""RAM as a container sees it: a cgroup's limit, not the host's /proc/meminfo, bounds the
memory budget and the room for packed weights. Fake cgroup folders, host figures fixed."""

from types import SimpleNamespace

import psutil
import pytest

from specviz.models import memory

GiB = 1 << 30
HOST = SimpleNamespace(total=256 * GiB, available=200 * GiB)


@pytest.fixture(autouse=True)
def host(monkeypatch):
    monkeypatch.setattr(psutil, "virtual_memory", lambda: HOST)


def _write(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def test_cgroup_v2_limit_bounds_total_and_available(tmp_path):
    # A 16 GiB container using 10 GiB, 3 GiB of it droppable page cache: 9 GiB left.
    cg = _write(
        tmp_path,
        {
            "memory.max": f"{16 * GiB}\n",
            "memory.current": f"{10 * GiB}\n",
            "memory.stat": f"anon {7 * GiB}\ninactive_file {3 * GiB}\nactive_file 0\n",
        },
    )
    assert memory.ram_total(cg) == 16 * GiB
    assert memory.ram_available(cg) == 9 * GiB


def test_cgroup_v1_limit(tmp_path):
    cg = _write(
        tmp_path,
        {
            "memory/memory.limit_in_bytes": f"{8 * GiB}",
            "memory/memory.usage_in_bytes": f"{6 * GiB}",
            "memory/memory.stat": f"total_inactive_file {1 * GiB}\n",
        },
    )
    assert memory.ram_total(cg) == 8 * GiB
    assert memory.ram_available(cg) == 3 * GiB


@pytest.mark.parametrize(
    "files",
    [{}, {"memory.max": "max\n", "memory.current": "12345"}, {"memory/memory.limit_in_bytes": str(2**63 - 4096)}],
)
def test_no_limit_means_the_machines_figures(tmp_path, files):
    cg = _write(tmp_path, files)
    assert memory.ram_total(cg) == HOST.total
    assert memory.ram_available(cg) == HOST.available


def test_a_limit_above_the_machine_changes_nothing(tmp_path):
    cg = _write(tmp_path, {"memory.max": str(512 * GiB), "memory.current": str(GiB)})
    assert memory.ram_total(cg) == HOST.total
    assert memory.ram_available(cg) == HOST.available


def test_usage_over_the_limit_leaves_nothing(tmp_path):
    cg = _write(tmp_path, {"memory.max": str(4 * GiB), "memory.current": str(5 * GiB)})
    assert memory.ram_available(cg) == 0


def test_budget_is_ninety_percent_of_the_containers_ram(tmp_path, monkeypatch):
    import torch

    monkeypatch.delenv("SPECVIZ_MEMORY_BUDGET_GB", raising=False)
    monkeypatch.setattr(memory, "CGROUP", _write(tmp_path, {"memory.max": str(16 * GiB)}))
    limit, source = memory.budget(torch.device("cpu"))
    assert limit == int(16 * GiB * 0.9)
    assert "17.2 GB of RAM" in source
