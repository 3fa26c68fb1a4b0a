"""Deprecated alias of neuronsim.tools.hub, kept for one release.

``python -m neuronsim.hub`` runs ``python -m neuronsim.tools.hub`` with the same arguments
and exit status; importing ``neuronsim.hub`` gives the module ``neuronsim.tools.hub``.
"""

import sys

from neuronsim.tools import hub as _hub

if __name__ == "__main__":
    sys.exit(_hub.main())
else:
    sys.modules[__name__] = _hub
