"""``python -m neuronsim.tools.hub [--cache-dir DIR] [--force]``: see the package docstring."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
