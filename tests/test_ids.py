"""Ids: unique, uuid4-shaped, safe to make from many threads at once (graphs are shared)."""

from __future__ import annotations

import os
import re
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from nodestep import _ids
from nodestep.testing import sequential_ids, ticking_clock

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture
def short_switch_interval() -> Iterator[None]:
    """Let the interpreter switch threads every microsecond, so races show up."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_new_id_is_a_canonical_uuid4() -> None:
    for _ in range(1000):
        made = _ids.new_id()
        assert UUID4.match(made), made
        assert uuid.UUID(made).version == 4


def test_new_id_draws_every_random_digit_at_random() -> None:
    # Ids are formatted in batches, a column of digits at a time: a column copied from the
    # wrong place would repeat a digit or a dash. Each of the 30 random positions takes all
    # 16 digits in 2,000 ids (one missing: odds below 1e-50), the variant's all 4 of its.
    made = [_ids.new_id().replace("-", "") for _ in range(2000)]
    for at in range(32):
        seen = {m[at] for m in made}
        if at == 12:
            assert seen == {"4"}
        elif at == 16:
            assert seen == set("89ab")
        else:
            assert seen == set("0123456789abcdef"), at
    assert len(set(made)) == len(made)


@pytest.mark.slow
@pytest.mark.usefixtures("short_switch_interval")
def test_new_id_from_eight_threads_never_fails_or_repeats() -> None:
    per_thread, workers = 25_000, 8
    made: list[list[str]] = [[] for _ in range(workers)]
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def work(k: int) -> None:
        start.wait()
        try:
            for _ in range(per_thread):
                made[k].append(_ids.new_id())
        except BaseException as error:  # what the old unlocked pool raised: IndexError
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    every = [i for ids in made for i in ids]
    assert len(every) == per_thread * workers
    assert len(set(every)) == len(every), "an id was handed out twice"


def test_sequential_ids_count_in_uuid_shape() -> None:
    new_id = sequential_ids()
    assert [new_id() for _ in range(3)] == [
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    ]
    assert sequential_ids(start=42)() == "00000000-0000-4000-8000-000000000042"
    assert all(UUID4.match(sequential_ids(start=n)()) for n in (1, 10**11))


def test_ticking_clock_moves_one_step_per_reading() -> None:
    clock = ticking_clock(start=100.0, step=0.5)
    assert [clock(), clock(), clock()] == [100.0, 100.5, 101.0]
    assert ticking_clock()() == 1_700_000_000.0


@pytest.mark.usefixtures("short_switch_interval")
def test_sequential_ids_shared_by_threads_never_repeat() -> None:
    new_id = sequential_ids()
    made: list[str] = []
    threads = [
        threading.Thread(target=lambda: made.extend(new_id() for _ in range(2000)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == len(made) == 8000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_repeats_the_ids_its_parent_makes_next() -> None:
    _ids.new_id()  # the pool now holds bytes the parent has not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its next ids, then leave without running pytest's exit
        try:
            os.write(write, " ".join(_ids.new_id() for _ in range(8)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    parent = {_ids.new_id() for _ in range(8)}
    assert len(child) == 8
    assert not child & parent
