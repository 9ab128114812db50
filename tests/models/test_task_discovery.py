"""Task discovery scans the tasks package once; a task registered at runtime is found all the same."""

import dataclasses
import pkgutil

from preflight.models.core import task as registry
from preflight.models.core.task import get_task, register


def test_a_second_lookup_does_not_scan_the_tasks_package_again(monkeypatch):
    get_task("gemm")  # discovered by now, whatever ran before
    scans = []
    monkeypatch.setattr(pkgutil, "iter_modules", lambda *args, **kwargs: scans.append(args) or iter(()))
    assert get_task("fpga").name == "fpga"
    assert "gemm" in [task.name for task in registry.all_tasks()]
    assert scans == []


def test_a_task_registered_at_runtime_is_found(monkeypatch):
    toy = dataclasses.replace(get_task("gemm"), name="toy-runtime")
    monkeypatch.setitem(registry.TASKS, "toy-runtime", toy)  # removed again after the test
    registry.TASKS.pop("toy-runtime")
    assert register(toy) is toy
    assert get_task("toy-runtime") is toy
    assert toy in registry.all_tasks()
