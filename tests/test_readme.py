"""The README's first-hour parts say what the code does: its complete kernel is the example file
that the tests build, and nothing in it is a placeholder."""

import re

from harness.kernels.registry import PROJECT_ROOT


def test_the_readmes_first_kernel_is_the_example_file():
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = re.search(r"```cuda\n(.*?)```", readme, re.DOTALL)
    assert block, "the README shows no complete kernel"
    assert block.group(1) == (PROJECT_ROOT / "examples" / "first_kernel.cu").read_text()


def test_the_readme_has_no_placeholders():
    assert not re.search(r"@@\w+@@|TODO|TBD", (PROJECT_ROOT / "README.md").read_text())
