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
