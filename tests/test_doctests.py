"""Every docstring example in the package runs as a doctest (one test per module).

The modules are found by walking the installed package, so a new module's examples run
without registering it anywhere. `hassejax.pretrained` needs the `[real]` extra and is
skipped, with the reason, where it is not installed. No option flags: an example that elides output or wraps a long
line carries its own ``# doctest: +ELLIPSIS`` (or ``+NORMALIZE_WHITESPACE``), so ``python -m doctest`` and a reader's
fresh session agree with the suite (a fresh user: 14 examples failed without the suite's flags).
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re

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
    result = doctest.testmod(module, optionflags=0, verbose=False)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (run: python -m doctest -v)"
    )


def test_version_is_the_installed_distributions():
    from importlib import metadata

    assert hassejax.__version__ == metadata.version("hassejax")
    assert hassejax.__version__.count(".") >= 1


def _public_callables() -> dict[str, object]:
    """Every function and class a public package exports in `__all__` (exceptions and warnings aside), by its
    first exported name."""
    import inspect

    packages = ["hassejax"] + [
        info.name
        for info in pkgutil.walk_packages(hassejax.__path__, prefix="hassejax.")
        if info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
    ]
    found: dict[int, tuple[str, object]] = {}
    for name in sorted(packages):
        if _missing_extra(name) is not None:
            continue
        package = importlib.import_module(name)
        for attr in getattr(package, "__all__", ()):
            obj = getattr(package, attr)
            if inspect.isclass(obj) and issubclass(obj, (Exception, Warning)):
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.setdefault(id(obj), (f"{name}.{attr}", obj))
    return dict(found.values())


def test_every_public_function_and_class_has_an_example_that_runs():
    """The brief: every public function and class has an example that runs as a doctest (run by the test above,
    in the module that defines it)."""
    import inspect

    public = _public_callables()
    assert len(public) > 150, sorted(public)  # the walk found the packages
    missing = sorted(name for name, obj in public.items() if ">>>" not in (inspect.getdoc(obj) or ""))
    assert not missing, f"{len(missing)} public names without a `>>>` example: {', '.join(missing)}"
    defined_in = {obj.__module__ for obj in public.values()}
    assert defined_in <= set(MODULES), sorted(defined_in - set(MODULES))  # so the examples run above


# Where a public docstring names its source: a "Source:" or "References:" section, a spec section or a paper.
_SOURCE = re.compile(r"Source|References?:|spec [a-z_]+\.md|arXiv:\d")


def test_every_public_function_and_class_names_its_errors_and_its_source():
    """The brief: every public docstring says the errors raised (functions) and its source (paper, spec section,
    or "(derived)" for the package's own constructions)."""
    import inspect

    public = _public_callables()
    docs = {name: inspect.getdoc(obj) or "" for name, obj in public.items()}
    no_raises = sorted(name for name, obj in public.items() if inspect.isfunction(obj) and "Raises" not in docs[name])
    no_source = sorted(name for name in public if not _SOURCE.search(docs[name]))
    assert not no_raises, f"{len(no_raises)} public functions without a **Raises:** section: {', '.join(no_raises)}"
    assert not no_source, f"{len(no_source)} public names without a source: {', '.join(no_source)}"


_SOLVES = re.compile(r"\b(solve_gaussian|solve_low_rank_gaussian)\b")  # rtol = atol = 1e-8 by default (particles: 1e-6)
_RTOL = re.compile(r"\brtol=([0-9.eE+-]+)")


def _float32_tolerance(line: str) -> bool:
    """Whether a line that solves passes its own `rtol` of at least 1e-6 (one float32 resolves)."""
    found = _RTOL.search(line)
    try:
        return found is not None and float(found.group(1)) >= 1e-6
    except ValueError:
        return False


def test_examples_that_solve_at_the_default_tolerances_enable_float64():
    """The suite runs with float64 on (conftest), a user's session does not: a fresh user's review found examples
    that solve at the default tolerances (rtol = atol = 1e-8, float64 ones) printing other numbers and warning in
    float32. An example that solves (directly or through a wrapper such as ``partial``) without its own float32
    `rtol` turns float64 on itself, as the README's block does."""
    finder, parser = doctest.DocTestFinder(), doctest.DocTestParser()
    missing = []
    for name in MODULES:
        if _missing_extra(name) is not None:
            continue
        for test in finder.find(importlib.import_module(name)):
            # one example is one fenced block: split the docstring's examples where their blocks end
            for block in re.split(r"\n\s*```\s*\n", test.docstring or ""):
                source = "\n".join(e.source for e in parser.get_examples(block))
                solving = [
                    line
                    for line in source.splitlines()
                    if _SOLVES.search(line) and not line.lstrip().startswith(("from ", "import "))
                ]
                if solving and 'jax_enable_x64", True' not in source and not all(map(_float32_tolerance, solving)):
                    missing.append(test.name)
    assert not missing, f"examples that solve at float64 tolerances without enabling float64: {sorted(set(missing))}"
