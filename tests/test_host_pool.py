"""Host memory that downloads land in, used again (harness/gpu/host_pool.py): a block goes back
to the pool only when no array refers to it, views included; a block is handed out again for
the same size; small arrays and what the pool may keep stay plain numpy."""

from __future__ import annotations

import gc
import threading

import numpy as np

from harness.gpu.host_pool import HostPool

MB = 1 << 20


def test_a_block_comes_back_only_when_nothing_refers_to_it():
    pool = HostPool(kept_bytes=16 * MB, min_bytes=MB)
    a = pool.array((512, 1024), np.float32)
    assert a.shape == (512, 1024) and a.dtype == np.float32
    assert a.flags.c_contiguous and a.flags.writeable
    a[:] = 7.0
    view, address = a[::3, 5:], a.ctypes.data
    del a
    gc.collect()
    assert pool.array((512, 1024), np.float32).ctypes.data != address  # the view holds it
    assert float(view[0, 0]) == 7.0
    del view
    gc.collect()
    again = pool.array((2 * MB,), np.uint8)  # the same bytes, another shape and type
    assert again.ctypes.data == address and pool.made == 2


def test_small_arrays_and_blocks_past_what_the_pool_keeps_are_numpys():
    pool = HostPool(kept_bytes=3 * MB, min_bytes=MB)
    assert pool.array((100,), np.float64).base is None
    big = pool.array((4 * MB,), np.uint8)
    del big
    gc.collect()
    pool.array((4 * MB,), np.uint8)
    assert pool.made == 2  # not kept: over kept_bytes


def test_blocks_handed_out_on_several_threads_are_never_shared():
    pool = HostPool(kept_bytes=64 * MB, min_bytes=MB)
    seen, lock, wrong = [], threading.Lock(), []

    def work(k: int) -> None:
        for i in range(50):
            x = pool.array((MB // 4,), np.float32)
            x[:] = k * 1000 + i
            with lock:
                seen.append(x.ctypes.data)
            if not (x == k * 1000 + i).all():
                wrong.append((k, i))
            del x

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and pool.made <= 8 and len(seen) == 200


def test_a_large_block_is_marked_for_locking_once_and_kept_while_locked(monkeypatch):
    """driver.page_locked's bookkeeping: a pool array of LOCK_MIN_BYTES or more (or a view of
    one) yields its block once, page-aligned; a small or plain array never; a locked block
    nobody uses stays in the pool past ``kept_bytes`` and is handed out again; no more than
    LOCKED_MOST_BYTES are locked; unlocking gives the bytes back."""
    from harness.gpu import host_pool

    monkeypatch.setattr(host_pool, "LOCK_MIN_BYTES", 2 * MB)
    monkeypatch.setattr(host_pool, "LOCKED_MOST_BYTES", 5 * MB)
    pool = HostPool(kept_bytes=0, min_bytes=MB)
    big = pool.array((4 * MB,), np.uint8)
    block = pool.to_lock(big[1:])
    assert block is not None and block.locked and block.address % host_pool.PAGE == 0
    assert block.address == big.ctypes.data and block.span == 4 * MB
    assert pool.to_lock(big) is None  # locked already
    assert pool.to_lock(pool.array((MB,), np.uint8)) is None  # under LOCK_MIN_BYTES
    assert pool.to_lock(np.empty(4 * MB, np.uint8)) is None  # not the pool's
    other = pool.array((3 * MB,), np.uint8)
    assert pool.to_lock(other) is None  # 4 + 3 MB locked would pass LOCKED_MOST_BYTES
    address = big.ctypes.data
    del big
    gc.collect()
    again = pool.array((4 * MB,), np.uint8)  # kept although kept_bytes is 0: it is locked
    assert again.ctypes.data == address and pool.made == 3
    pool.unlocked(block)
    assert not block.locked and pool.locked_bytes == 0
    assert pool.to_lock(other) is not None
