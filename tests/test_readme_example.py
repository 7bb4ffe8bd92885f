"""The README's Python example runs as written, on a small dataset placed where it looks."""
import contextlib
import io
import re
from pathlib import Path

from posed_dataset import write_posed_dataset

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_tracks_every_frame(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "README.md should hold one Python example"
    write_posed_dataset(tmp_path / "demo_out" / "drone-video", 6, seed=1)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme_example"})
    lines = out.getvalue().splitlines()
    assert [int(line.split()[0]) for line in lines] == list(range(6))
    assert all(line.split()[1] in ("tracked", "coasting", "lost") for line in lines)
