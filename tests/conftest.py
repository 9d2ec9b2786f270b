import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

# Tests run in float64 so that closed forms can be checked to tight tolerances; the
# library itself is dtype-explicit (closure matmuls are float32/bf16 whatever this says).
jax.config.update("jax_enable_x64", True)

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")
