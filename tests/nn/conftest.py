import jaxtyping
import pytest


@pytest.fixture
def no_runtime_typecheck():
    """Call as a user does: without the jaxtyping import hook this suite runs with, so the
    library's own validation (not the annotation check) meets the bad input."""
    old = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", old)
