from harness.compiler.ptxas import parse_report

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sgemm_a' for 'sm_90'
ptxas info    : Function properties for sgemm_a
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 2.240 ms
ptxas info    : Compiling entry function 'sgemm_b' for 'sm_90'
ptxas info    : Function properties for sgemm_b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 380 bytes cmem[0]
"""


def test_two_functions():
    report = parse_report(LOG)
    a, b = report["sgemm_a"], report["sgemm_b"]
    assert (a.registers, a.static_smem_bytes, a.barriers) == (128, 8192, 1)
    assert (a.stack_frame_bytes, a.spill_store_bytes, a.spill_load_bytes) == (16, 8, 12)
    assert a.constant_bytes == 400
    assert (b.registers, b.static_smem_bytes, b.spill_store_bytes, b.barriers) == (40, 0, 0, 0)


def test_only_ptxas_lines_count():
    log = LOG + ("info    : Function properties for 'sgemm_b':\n"
                 "info    : used 41 registers, used 1 barriers, 9216 bytes smem\n")
    assert parse_report(log)["sgemm_b"].static_smem_bytes == 0


def test_empty_log_has_no_functions():
    assert parse_report("") == {}
    assert parse_report("ptxas info    : 0 bytes gmem\n") == {}
