"""Every docstring example in the package runs as a doctest (one test per module).

The modules are found by walking the installed package, so a new module's examples run
without registering it anywhere. `hassejax.pretrained` needs the `[real]` extra and is
skipped, with the reason, where it is not installed.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import hassejax

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(hassejax.__path__, prefix="hassejax.")
    if not info.name.endswith("__main__")
)
EXTRAS = {"hassejax.pretrained": ("safetensors", "tokenizers")}


def _missing_extra(name: str) -> str | None:
    for prefix, needs in EXTRAS.items():
        if name == prefix or name.startswith(prefix + "."):
            missing = [m for m in needs if importlib.util.find_spec(m) is None]
            if missing:
                return f"{name} needs the [real] extra ({', '.join(missing)} not installed)"
    return None


def test_the_walk_finds_the_package():
    assert "hassejax.masks.structured" in MODULES or "hassejax.masks" in MODULES
    assert len(MODULES) > 40


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    reason = _missing_extra(name)
    if reason is not None:
        pytest.skip(reason)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (run: python -m doctest -v)"
    )


def test_version_is_the_installed_distributions():
    from importlib import metadata

    assert hassejax.__version__ == metadata.version("hassejax")
    assert hassejax.__version__.count(".") >= 1
