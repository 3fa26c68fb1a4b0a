"""python -m neuronsim.nki script.py [args]: runs a script that imports nki (NKI kernels)
with nki made neuronsim.nki, so its kernels run on the simulator."""

import runpy
import sys

from . import install


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m neuronsim.nki script.py [args...]")
    if not install():
        sys.exit("another nki package is importable; neuronsim.nki does not shadow it")
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
