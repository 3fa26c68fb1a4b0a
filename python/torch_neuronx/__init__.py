"""torch_neuronx, as neuronsim provides it: the module Trainium scripts import and that
Transformers and Accelerate look for (``importlib.util.find_spec("torch_neuronx")``)
to find a Trainium device. Importing it registers the simulated ``"neuron"`` device;
the API is neuronsim's (``import neuronsim``).

This is not AWS's torch-neuronx, and must never be installed beside it.
"""

from neuronsim import *  # noqa: F403 (the compatibility name re-exports the API)
from neuronsim import __version__, _autoload  # noqa: F401
from neuronsim.nki import nki_op  # noqa: E402, F401 (an NKI kernel as a PyTorch custom op)
