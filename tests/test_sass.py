"""SASS instruction mix with no GPU (cuobjdump from the toolkit or the wheel)."""

import pytest

from harness.compiler.compile import compile_kernel
from harness.compiler.sass import disassemble, instruction_mix, opcodes
from harness.kernels.registry import discover, select

KERNELS = discover()


def mix_of(name: str) -> dict:
    (kernel,) = select(KERNELS, [name])
    return instruction_mix(disassemble(compile_kernel(kernel, "sm_90").cubin))


def test_opcode_parsing():
    listing = """
        /*0090*/                   LDS.U.128 R8, [R3+0x10] ;        /* 0x000010000308 */
        /*00a0*/              @!P0 BRA 0x800 ;                      /* 0x0000000400d0 */
        /*00b0*/               @P1 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*00c0*/                   FFMA R1, R2, R3, R1 ;
        /*00d0*/              @!PT LDS RZ, [RZ] ;
    """
    assert opcodes(listing) == {"LDS.U.128": 1, "BRA": 1, "LDG.E.128.CONSTANT": 1, "FFMA": 1}
    mix = instruction_mix(listing)
    assert (mix["LDS.128"], mix["LDG.128"], mix["FFMA"], mix["LDS"], mix["total"]) == (
        1, 1, 1, 0, 4)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_no_kernel_spills(kernel):
    mix = instruction_mix(disassemble(compile_kernel(kernel, "sm_90").cubin))
    # it computes: FFMA, or tensor-core mma (an FP8 GEMM with no beta may issue no FFMA)
    assert mix["LDL"] == 0 and mix["STL"] == 0 and mix["FFMA"] + mix["QGMMA"] > 0


def test_tiled_kernel_reads_a_with_128_bit_loads_and_the_transposed_one_cannot():
    # As[ty][k..k+3] are consecutive words: ptxas merges them into LDS.128. AsT[k][ty] strides
    # by a padded row: one LDS per k. That is why 04 issues more shared loads than 03.
    tiled, padded = mix_of("03_smem_tiled:t32"), mix_of("04_smem_padded:pad")
    assert tiled["LDS.128"] == 8 and padded["LDS.128"] == 0
    assert tiled["LDS"] + tiled["LDS.128"] < padded["LDS"]
    assert mix_of("03_smem_tiled_ptx")["BAR"] == 2
