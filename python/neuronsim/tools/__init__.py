"""Tools beside the device: commands run by hand or by tests and benchmarks, which the
device runtime (``neuronsim`` itself, its compiler and its distributed backend) never
imports.

- ``python -m neuronsim.tools.hub [--cache-dir DIR] [--force]``: writes offline stand-ins
  of the Hugging Face models and data that neuronsim's scripts load.
- ``python -m neuronsim.tools.architectures``: runs a tiny model of every Transformers
  causal-LM architecture on the CPU and on "neuron" and tabulates which run.
- ``python -m neuronsim.tools.bench``: host and simulated speed of the PyTorch backend
  (``--check bench/expected_torch.csv`` gates the simulated figures).
"""
