"""Issue 38: a spec block is read whatever the file's line ends and byte-order mark, and a block
that is there but cannot be read (never closed, not first, a longer first line) is said to be
so at its line, not reported as missing with a spec to paste that is already there."""

import re
from pathlib import Path

import pytest

from harness.compiler.compile import compile_kernel
from harness.errors import SpecError
from harness.kernels.registry import PROJECT_ROOT, kernels_in
from harness.kernels.spec import parse_spec, read_spec

NAIVE = PROJECT_ROOT / "cu" / "sgemm" / "01_naive.cu"
TILED_PTX = PROJECT_ROOT / "ptx" / "sgemm" / "03_smem_tiled_ptx.ptx"
BOM = b"\xef\xbb\xbf"


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("source", [NAIVE, TILED_PTX], ids=["cu", "ptx"])
@pytest.mark.parametrize("dress", [crlf, lambda d: BOM + d, lambda d: BOM + crlf(d),
                                   lambda d: d.replace(b"\n", b"\r")],
                         ids=["crlf", "bom", "bom+crlf", "cr"])
def test_crlf_and_bom_files_read_as_the_same_spec(tmp_path, source, dress):
    path = tmp_path / source.name
    path.write_bytes(dress(source.read_bytes()))
    spec, plain = read_spec(path), read_spec(source)
    assert spec.entry == plain.entry and spec.params == plain.params
    assert spec.variants == plain.variants and spec.summary == plain.summary
    assert [e.text for e in spec.grid] == [e.text for e in plain.grid]


@pytest.mark.parametrize("source", [NAIVE, TILED_PTX], ids=["cu", "ptx"])
def test_a_bom_and_crlf_file_compiles(tmp_path, source):
    """NVRTC ("unrecognized token") and nvJitLink ("bad input") refuse a byte-order mark: the
    build leaves it out, and takes CRLF line ends as they are."""
    path = tmp_path / source.name
    path.write_bytes(BOM + crlf(source.read_bytes()))
    kernel = kernels_in(read_spec(path))[0]
    compiled = compile_kernel(kernel, "sm_90", use_cache=False)
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.resources.registers > 0


def test_a_toml_error_in_a_crlf_file_names_its_line(tmp_path):
    path = tmp_path / "k.cu"
    path.write_bytes(crlf(NAIVE.read_bytes().replace(b'precision = "fp32"', b"precision = fp32")))
    with pytest.raises(SpecError, match=r"k\.cu:5: the spec block is not valid TOML, column "
                                        r"\d+: .*: 'precision = fp32'$"):
        read_spec(path)


HEAD = NAIVE.read_text()


@pytest.mark.parametrize(("text", "match"), [
    # never closed, nothing after it
    (HEAD.split("*/")[0],
     r"^k\.cu:1: the spec block opened here \('/\* harness'\) is not closed anywhere in the "
     r"file; end it with '\*/' on the line after its last TOML line$"),
    # never closed, code after it
    (HEAD.replace("*/", "", 1),
     r"^k\.cu:1: the spec block opened here \('/\* harness'\) is not closed before line 17 "
     r"\('// Measurements, experiments and lessons: notes/01_naive.md'\), where the code "
     r"starts; end it with '\*/' on the line after its last TOML line$"),
    # closed only by a later comment: the body runs into the code
    (HEAD.replace("*/", "", 1).replace("extern \"C\"", "/* a note */\nextern \"C\""),
     r"^k\.cu:1: the spec block opened here \('/\* harness'\) is not closed before line \d+ "
     r"\('.*'\), where the code starts; end it with '\*/'"),
    # a longer first line
    (HEAD.replace("/* harness\n", "/* harness spec\n", 1),
     r"^k\.cu:1: the spec block's first line must be '/\* harness' alone, found "
     r"'/\* harness spec'"),
    # a first line garbled or in another case
    (HEAD.replace("/* harness\n", "/* Harness\n", 1),
     r"^k\.cu:1: the spec block's first line must be '/\* harness' \(lower case, alone\), found "
     r"'/\* Harness'$"),
    (HEAD.replace("/* harness\n", "/* har{ness\n", 1),
     r"^k\.cu:1: the spec block's first line must be '/\* harness' \(lower case, alone\), found "
     r"'/\* har\{ness'$"),
    # no first line at all
    (HEAD.replace("/* harness\n", "", 1),
     r"^k\.cu:1: this looks like a spec block without its first line \('entry = \.\.\.' before "
     r"a closing '\*/'\): start the file with '/\* harness' on a line of its own$"),
    # not first
    ("// Copyright the authors.\n" + HEAD,
     r"^k\.cu:2: the spec block \('/\* harness'\) must open the file, with only blank lines "
     r"before it; line 1 comes first \('// Copyright the authors\.'\): move the block to the "
     r"top$"),
])
def test_a_spec_block_that_is_there_is_never_called_missing(text, match):
    with pytest.raises(SpecError, match=match) as info:
        parse_spec(text, Path("k.cu"))
    assert "no spec block" not in str(info.value) and "\n" not in str(info.value)


def test_an_unclosed_block_in_a_crlf_file_with_a_bom(tmp_path):
    path = tmp_path / "k.cu"
    path.write_bytes(BOM + crlf(NAIVE.read_bytes().replace(b"*/", b"", 1)))
    with pytest.raises(SpecError, match=r"k\.cu:1: the spec block opened here \('/\* harness'\) "
                                        r"is not closed before line \d+"):
        read_spec(path)


def test_a_file_without_a_block_still_gets_the_spec_to_paste():
    with pytest.raises(SpecError, match=r"(?s)no spec block: .*entry = \"sgemm_naive\""):
        parse_spec(HEAD.split("*/", 1)[1], Path("k.cu"))


def test_a_ptx_kernel_and_its_include_with_a_bom_and_crlf_assemble(tmp_path):
    """PTX macros (#for, ${...}) read CRLF lines, and an included .ptxh's byte-order mark is
    left out with the kernel's own."""
    folder = PROJECT_ROOT / "ptx" / "hgemm"
    for name in ("11_mma_sync_bf16.ptx", "mma_sync_gemm.ptxh"):
        (tmp_path / name).write_bytes(BOM + crlf((folder / name).read_bytes()))
    kernel = kernels_in(read_spec(tmp_path / "11_mma_sync_bf16.ptx"))[0]
    compiled = compile_kernel(kernel, "sm_90", use_cache=False)
    assert compiled.resources.registers > 0


def test_every_spec_key_is_in_the_readmes_spec_reference():
    """docs/spec.md (with docs/gemm.md for the signature keys) documents every key a spec may
    have (block_order, macros, ... included)."""
    from harness.kinds import gemm_shaped as spec

    readme = "".join((PROJECT_ROOT / "docs" / f).read_text() for f in ("spec.md", "gemm.md"))
    missing = [key for key in spec._REQUIRED + spec._OPTIONAL
               if not re.search(rf"(`|\[|\b){re.escape(key)}( =|`|\]|\.)", readme)]
    assert missing == []
    assert '`block_order = "spread"`' in readme and "`macros = true | false" in readme
