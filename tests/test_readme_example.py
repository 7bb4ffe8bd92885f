"""The README's Python example (its "## Python" section) runs as written, on a small dataset placed where it
looks. The controller snippet of the live section needs a running service; tests/service covers its client."""
import contextlib
import io
import re
from pathlib import Path

from posed_dataset import write_posed_dataset

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_tracks_every_frame(tmp_path, monkeypatch):
    section = README.read_text().split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the README's Python section should hold one example"
    write_posed_dataset(tmp_path / "demo_out" / "drone-video", 6, seed=1)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme_example"})
    lines = out.getvalue().splitlines()
    assert [int(line.split()[0]) for line in lines] == list(range(6))
    assert all(line.split()[1] in ("tracked", "coasting", "lost") for line in lines)
