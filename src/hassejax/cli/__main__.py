"""``python -m hassejax.cli``: the ``hassejax`` command line."""

import sys

from . import main

sys.exit(main())
