"""Shared setup of neuronsim's Python tests.

The simulator runs in functional-only mode unless the caller chose a mode (values, no
timing: fast). Every test starts out of strict mode with empty fallback counts on
neuron:0, and leaves them so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("NEURONSIM_MODE", "functional-only")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

import neuronsim

# Variables that choose the simulated machine or the fallback policy; a subprocess
# starts without them unless a test sets them.
MACHINE_VARIABLES = (
    "NEURONSIM_INSTANCE",
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES",
    "NEURON_RT_VIRTUAL_CORE_SIZE",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURONSIM_STRICT",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
)


def pytest_configure(config):
    # Every fallback warns once per op; tests that care record warnings themselves.
    config.addinivalue_line("filterwarnings", "ignore:.*it runs on the CPU:UserWarning")


@pytest.fixture(autouse=True)
def neuron_state():
    """Empty fallback counts, strict mode off and neuron:0 current during a test; the
    strict mode and current device of before are restored after it."""
    old_strict = neuronsim.strict()
    old_device = torch.neuron.current_device()
    neuronsim.set_strict(False)
    neuronsim.reset_fallback_counts()
    torch.neuron.set_device(0)
    yield
    neuronsim.set_strict(old_strict)
    neuronsim.reset_fallback_counts()
    torch.neuron.set_device(old_device)


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if k not in MACHINE_VARIABLES}
    full_env.update(env or {})
    return full_env


def _run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_environment(env),
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
    )


class Spawned:
    """A Python subprocess started now (so that several run at once) whose printed JSON
    is read when a test needs it."""

    def __init__(self, code: str, env: dict[str, str] | None = None):
        self.process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._done = None

    def json(self, timeout: float = 120):
        if self._done is None:
            stdout, stderr = self.process.communicate(timeout=timeout)
            self._done = (self.process.returncode, stdout, stderr)
        returncode, stdout, stderr = self._done
        assert returncode == 0, f"subprocess failed:\n{stderr[-4000:]}"
        lines = stdout.strip().splitlines()
        assert lines, f"subprocess printed nothing:\n{stderr[-4000:]}"
        return json.loads(lines[-1])

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture(scope="session")
def spawn_python():
    """spawn_python(code, env) starts `code` in a fresh interpreter now; .json() waits for
    it and returns the JSON value it printed last."""
    return Spawned


@pytest.fixture
def run_python():
    """run_python(code, env) runs `code` in a fresh interpreter, the machine variables
    unset except those in `env`; returns the CompletedProcess."""
    return _run_python


@pytest.fixture
def run_json(run_python):
    """run_json(code, env): runs `code`, which must print one JSON value as its last
    line, and returns that value (failing with the subprocess's stderr otherwise)."""

    def run(code: str, env: dict[str, str] | None = None):
        done = run_python(code, env)
        assert done.returncode == 0, f"subprocess failed:\n{done.stderr[-4000:]}"
        lines = done.stdout.strip().splitlines()
        assert lines, f"subprocess printed nothing:\n{done.stderr[-4000:]}"
        return json.loads(lines[-1])

    return run


def assert_device_works(device: str = "neuron:0") -> None:
    """The device still makes tensors, runs a kernel and copies back correct values."""
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.full((2, 3), 2.0)
    got = (a.to(device) + b.to(device)).cpu()
    torch.testing.assert_close(got, a + b)
    assert torch.equal(torch.ones(3, device=device).cpu(), torch.ones(3))


@pytest.fixture
def device_works():
    return assert_device_works


@pytest.fixture(scope="session")
def offline_hub_cache(tmp_path_factory):
    """A Hugging Face cache written once per session by `python -m neuronsim.tools.hub` (tiny
    stand-ins of the seed scripts' models and data): (its folder, the tool's output). The
    caches come from --cache-dir alone, whatever this environment names."""
    home = tmp_path_factory.mktemp("hf_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.hub", "--cache-dir", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return home, done.stdout
