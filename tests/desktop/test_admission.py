"""Admission of desktops by free memory, with a fake memory reading: a desktop that would not
fit waits (its sample is not failed) and starts once memory frees up."""

from __future__ import annotations

import asyncio

from control_osworld.desktop.admission import MemoryAdmission, available_memory_mb


class FakeMemory:
    def __init__(self, mb: float):
        self.mb = mb

    def __call__(self) -> float:
        return self.mb


def _admission(mem: FakeMemory, log: list[str]) -> MemoryAdmission:
    return MemoryAdmission(available_mb=mem, reserve_mb=500, poll_s=0.01, log=log.append)


def test_a_desktop_waits_until_its_memory_limit_fits():
    async def main():
        mem, log = FakeMemory(6000), []
        adm = _admission(mem, log)
        await adm.acquire(2048)  # 6000 - 500 >= 2048
        adm.started(2048)
        mem.mb = 4000  # the first desktop took 2000 MB
        await adm.acquire(2048)  # 4000 - 500 >= 2048
        # Admitted but not yet started: its 2048 MB do not show in the reading yet, so they count.
        third = asyncio.create_task(adm.acquire(2048))  # 4000 - 500 - 2048 < 2048
        await asyncio.sleep(0.1)
        assert not third.done() and adm.waited == 1 and "holding back a desktop" in log[0]
        adm.started(2048)
        mem.mb = 2400  # both up: 2400 - 500 < 2048 still
        await asyncio.sleep(0.1)
        assert not third.done()
        adm.release()  # one desktop stopped and its memory came back
        mem.mb = 4400
        await asyncio.wait_for(third, 1)
        assert adm.starting_mb == 2048 and adm.running == 1 and "admitted after" in log[-1]

    asyncio.run(main())


def test_with_nothing_running_a_desktop_is_always_admitted():
    async def main():
        adm = _admission(FakeMemory(100), [])
        await asyncio.wait_for(adm.acquire(2048), 1)  # waiting could never free anything
        adm.failed(2048)  # it failed to start: nothing counts any more
        assert adm.starting_mb == 0 and adm.running == 0
        await asyncio.wait_for(adm.acquire(2048), 1)

    asyncio.run(main())


def test_the_real_reading_is_a_plausible_number():
    mb = available_memory_mb()
    assert 0 < mb < 1 << 30
