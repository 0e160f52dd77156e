import pytest

from harness.errors import HarnessError
from harness.run.runner import _failure, parse_size


def test_parse_size():
    assert parse_size("4096") == (4096, 4096, 4096)
    assert parse_size("128,256,64") == (128, 256, 64)
    assert parse_size("128x256x64") == (128, 256, 64)
    for bad in ("0", "1,2", "a", "1,2,3,4", "-5"):
        with pytest.raises(HarnessError, match="is not N or M,N,K"):
            parse_size(bad)


def test_failures_are_classified():
    status, message = _failure({"kind": "CudaError", "message": "cuStreamSynchronize failed: "
                                "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access"},
                               False, 3, "", 60)
    assert status == "fault" and "CUDA context is lost" in message
    assert _failure(None, True, -9, "", 60)[0] == "timeout"
    assert "no progress for 60 s" in _failure(None, True, -9, "", 60)[1]
    assert _failure({"kind": "LaunchError", "message": "needs 240 KB"}, False, 3, "", 60) == (
        "launch error", "needs 240 KB")
    assert _failure(None, False, -11, "Segmentation fault", 60)[0] == "fault"
    status, message = _failure(None, False, 1, "Traceback: boom", 60)
    assert status == "error" and "boom" in message
