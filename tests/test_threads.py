"""The thread policy of ``track`` and ``serve``: which threads are set where (no timing here: the
shared-CPU figures come from snaketrack bench shared-cpu)."""
import json
import os
import subprocess
import sys

import pytest

from snaketrack.errors import InputError
from snaketrack.threads import QUIET_OPENMP, ThreadPolicy, quiet_openmp

PROBE = r"""
import argparse, io, json, os, sys
import snaketrack.cli  # sets the OpenMP environment before torch is loaded
loaded_before = "torch" in sys.modules
from snaketrack.commands import apply_thread_policy
threads = None if sys.argv[1] == "default" else int(sys.argv[1])
applied = apply_thread_policy(argparse.Namespace(threads=threads))
import cv2, torch
from snaketrack.training.live import OnnxNetwork, OpenVinoNetwork
buf = io.BytesIO()
torch.onnx.export(torch.nn.Conv2d(3, 1, 3, padding=1).eval(), (torch.zeros(1, 3, 16, 16),), buf, dynamo=False,
                  input_names=["image"], output_names=["logit"])
onnx = OnnxNetwork(buf.getvalue())
print(json.dumps({"env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME")},
                  "torch_loaded_before": loaded_before, "applied": applied,
                  "torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
                  "cv2": cv2.getNumThreads(),
                  "onnxruntime": onnx.session.get_session_options().intra_op_num_threads,
                  "openvino": OpenVinoNetwork(buf.getvalue()).options["INFERENCE_NUM_THREADS"]}))
"""


def _probe(threads: str, **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in QUIET_OPENMP and k != "OMP_NUM_THREADS"}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE, threads], capture_output=True, text=True, env=environ,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_default_policy_gives_the_tracker_and_the_segmenter_one_thread_each_and_quiet_openmp():
    got = _probe("default")
    assert got["env"] == {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
    assert not got["torch_loaded_before"]  # the environment was set before OpenMP read it
    assert got["torch"] == 1 and got["interop"] == 1 and got["cv2"] == 1
    assert got["onnxruntime"] == 1 and got["openvino"] == 1  # the engine's own thread
    assert got["applied"] == {"torch_threads": 1, "torch_interop_threads": 1, "segmenter_threads": 1}


def test_threads_n_gives_n_to_the_tracker_and_the_segmenter_and_a_user_s_openmp_setting_stays():
    got = _probe("3", OMP_WAIT_POLICY="ACTIVE")
    assert got["env"]["OMP_WAIT_POLICY"] == "ACTIVE" and got["env"]["KMP_BLOCKTIME"] == "0"
    assert got["torch"] == 3 and got["interop"] == 1 and got["cv2"] == 3
    assert got["onnxruntime"] == 3 and got["openvino"] == 3


def test_policies_of_the_flag():
    assert ThreadPolicy.of(None) == ThreadPolicy(1, 1, 1)
    assert ThreadPolicy.of(4) == ThreadPolicy(tracker=4, interop=1, segmenter=4)
    with pytest.raises(InputError, match="--threads 0"):
        ThreadPolicy.of(0)
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert quiet_openmp(env) == {"OMP_WAIT_POLICY": "ACTIVE", "KMP_BLOCKTIME": "0"} == env
