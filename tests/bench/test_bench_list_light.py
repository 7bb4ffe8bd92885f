"""``snaketrack bench --list`` loads every benchmark module: none of them may import a benchmark's heavy work."""
import subprocess
import sys

HEAVY = ("torch", "mujoco", "cv2", "ray", "segmentation_models_pytorch")


def test_registry_imports_no_heavy_library():
    code = ("import sys; from snaketrack.bench import registry; registry.benchmarks(); "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"benchmark modules import {out} when listed"
