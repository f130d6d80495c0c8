"""The group committer: concurrent items share batches, and a bad item can only fail itself."""

from __future__ import annotations

import asyncio

import pytest

from advisor.db.batching import GroupCommitter


class Poison(Exception):
    pass


async def test_concurrent_items_share_batches_and_keep_their_order() -> None:
    seen: list[list[int]] = []

    async def write(items: list[int]) -> list[int | Exception]:
        seen.append(list(items))
        await asyncio.sleep(0.01)  # a write takes a while: the next items queue meanwhile
        return [i * 10 for i in items]

    committer: GroupCommitter[int, int] = GroupCommitter(write, max_batch=8)
    results = await asyncio.gather(*(committer.submit(i) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert sorted(i for batch in seen for i in batch) == list(range(20))
    assert len(seen) < 20  # batched, not one write per item
    assert max(len(b) for b in seen) <= 8
    assert (committer.batches, committer.items) == (len(seen), 20)


async def test_an_idle_committer_writes_a_lone_item_at_once() -> None:
    async def write(items: list[str]) -> list[str | Exception]:
        return [s.upper() for s in items]

    committer: GroupCommitter[str, str] = GroupCommitter(write)
    assert await committer.submit("a") == "A"
    assert await committer.submit("b") == "B"  # a new runner after the first one finished
    assert committer.batches == 2


async def test_an_item_error_reaches_only_its_submitter() -> None:
    async def write(items: list[int]) -> list[int | Exception]:
        return [Poison(f"bad {i}") if i == 3 else i for i in items]

    committer: GroupCommitter[int, int] = GroupCommitter(write)
    outcomes = await asyncio.gather(*(committer.submit(i) for i in range(6)), return_exceptions=True)
    assert [o for o in outcomes if not isinstance(o, Exception)] == [0, 1, 2, 4, 5]
    assert isinstance(outcomes[3], Poison)


async def test_a_failed_batch_is_retried_item_by_item() -> None:
    calls: list[list[int]] = []

    async def write(items: list[int]) -> list[int | Exception]:
        calls.append(list(items))
        await asyncio.sleep(0)
        if 3 in items:
            raise Poison("the whole transaction failed")
        return list(items)

    committer: GroupCommitter[int, int] = GroupCommitter(write)
    outcomes = await asyncio.gather(*(committer.submit(i) for i in range(6)), return_exceptions=True)
    assert outcomes[:3] == [0, 1, 2] and outcomes[4:] == [4, 5]
    assert isinstance(outcomes[3], Poison)
    assert [3] in calls  # the culprit was tried alone
    assert any(len(c) > 1 and 3 in c for c in calls)


async def test_a_cancelled_submitter_does_not_break_the_batch() -> None:
    release = asyncio.Event()

    async def write(items: list[int]) -> list[int | Exception]:
        await release.wait()
        return list(items)

    committer: GroupCommitter[int, int] = GroupCommitter(write)
    first = asyncio.ensure_future(committer.submit(1))
    second = asyncio.ensure_future(committer.submit(2))
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    assert await second == 2
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await committer.submit(3) == 3


async def test_shared_gives_one_committer_per_key_and_loop() -> None:
    async def write(items: list[int]) -> list[int | Exception]:
        return list(items)

    a = GroupCommitter.shared("db-a", lambda: GroupCommitter(write))
    assert GroupCommitter.shared("db-a", lambda: GroupCommitter(write)) is a
    assert GroupCommitter.shared("db-b", lambda: GroupCommitter(write)) is not a


async def test_on_idle_runs_once_each_time_the_queue_runs_empty() -> None:
    events: list[str] = []

    async def write(items: list[int]) -> list[int | Exception]:
        events.append(f"write {len(items)}")
        await asyncio.sleep(0.01)
        return items

    async def idle() -> None:
        events.append("idle")

    committer: GroupCommitter[int, int] = GroupCommitter(write, max_batch=4, on_idle=idle)
    assert await asyncio.gather(*(committer.submit(i) for i in range(10))) == list(range(10))
    # Several batches back to back, then one idle call: not one per batch.
    assert events.count("idle") == 1 and events[-1] == "idle" and len(events) > 2
    assert await committer.submit(11) == 11  # a later submission: a new run of the queue, idle again
    assert events[-2:] == ["write 1", "idle"]
