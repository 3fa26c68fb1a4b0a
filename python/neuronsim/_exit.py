"""A clean exit after a backward pass on the device.

PyTorch's autograd engine runs a device's part of a backward pass on a thread of its own
for each device (``pt_autograd_<i>``), and since 2.13 every backward carries a copy of the
caller's ``contextvars`` context into that thread (``_engine_run_backward``). The device
thread drops its last reference to the finished pass a moment after the caller has its
gradients, and dropping that Python object takes the GIL. When the interpreter is already
shutting down by then (a script whose last act is a backward, a test that ends), Python
exits the thread from inside a C++ destructor and the process aborts ("terminate called
without an active exception", exit status 134). CUDA's device threads race the same way.

At exit, before the interpreter starts to finalise, each device's autograd thread is
given one more small backward pass, started from C++ without that context and with no
tensor that has a Python object: the thread can take it only once it has let go of the
last pass, and letting go of this one needs no GIL.
"""

from __future__ import annotations

import atexit
import threading

from . import _C

# How long the exit waits for the drain: a device thread stuck in a pass that never ends (a
# collective whose peer died) must not keep the process from exiting.
_DRAIN_TIMEOUT_S = 30.0


def _drain() -> None:
    try:
        _C.drain_autograd_threads()
    except Exception:  # noqa: BLE001 (exiting: a device left in a bad state must not fail it)
        pass


def _drain_autograd_threads() -> None:
    if not _C.backend_opened():
        return  # no device was used: no backward ran on one either
    drain = threading.Thread(target=_drain, name="neuronsim-exit-drain", daemon=True)
    drain.start()
    drain.join(_DRAIN_TIMEOUT_S)


def install() -> None:
    atexit.register(_drain_autograd_threads)
