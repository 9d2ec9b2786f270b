"""The README's interactive (``>>>``) tour examples run as doctests and print what the README shows."""

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# no option flags: `python -m doctest README.md` passes as the suite does (examples carry their own directives)
FLAGS = 0


def test_readme_examples():
    result = doctest.testfile(str(README), module_relative=False, optionflags=FLAGS)
    assert result.attempted >= 10 and result.failed == 0


def _blocks():
    """``(first line number, text)`` of each fenced code block of the README holding ``>>>`` examples."""
    text = README.read_text()
    found = []
    for match in re.finditer(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        if ">>>" in match.group(1):
            found.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return found


def test_readme_has_example_blocks():
    assert len(_blocks()) >= 4


@pytest.mark.parametrize("line, block", _blocks(), ids=[f"line{line}" for line, _ in _blocks()])
def test_readme_block_runs_alone(line, block):
    """A new user: the kernels block used `from_spec` imported by an earlier block (NameError run alone). Each
    block imports what it uses: it runs in fresh globals."""
    test = doctest.DocTestParser().get_doctest(block, {}, f"README.md block at line {line}", str(README), line - 1)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 1 and result.failed == 0
