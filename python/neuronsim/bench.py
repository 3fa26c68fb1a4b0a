"""Deprecated alias of neuronsim.tools.bench, kept for one release.

``python -m neuronsim.bench`` runs ``python -m neuronsim.tools.bench`` with the same
arguments and exit status; importing ``neuronsim.bench`` gives the module
``neuronsim.tools.bench``.
"""

import sys

from neuronsim.tools import bench as _bench

if __name__ == "__main__":
    sys.exit(_bench.main())
else:
    sys.modules[__name__] = _bench
