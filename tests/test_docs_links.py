"""Every reference to a doc in the code and the docs points at something that is there.

A reference is ``docs/NAME.md``, optionally followed by a quoted section (``docs/tracker.md,
"Depth damping"``: some heading of that file contains the quoted words). A relative Markdown link
in a doc (``[text](img/plot.png)``, ``[text](docs/oal.md)``) must name an existing file, and its
``#anchor``, if any, a heading of that file (GitHub's anchor of it). Moving a section or a file
without its readers fails here. No doc reports against a target: the docs say what the software
measures, not whether it met a figure someone once set. Nothing refers into ``docs/notebook/``: the docs
describe the software as it is, and the history of how it was measured lives in git.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".venv-pytorch3d", ".git", "demo_out", "build", "node_modules", ".pytest_cache"}

_REF = re.compile(
    r'docs/(?P<file>[\w./-]+?\.md)'
    r'`?(?:,?\s*\(?"(?P<section>[^"]{3,120})")?')
_LINK = re.compile(r'\]\((?P<target>[^)\s#]+)(?:#(?P<anchor>[^)]*))?\)')
_TARGET = re.compile(r'targets? (?:met|not met|missed|stand)|vs\.? target|against (?:the|its) target'
                     r'|\btargets?\s*(?::|≥|≤|\d)|\*\*(?:not )?met\b', re.I)
_NOTEBOOK = re.compile(r'docs/notebook\b')


def _sources() -> list[Path]:
    out = []
    for p in ROOT.rglob("*"):
        if (p.suffix in (".py", ".md") and p.is_file() and p != Path(__file__).resolve()
                and not SKIP & set(p.relative_to(ROOT).parts)):
            out.append(p)
    return out


def _flat(text: str) -> str:
    """The text on one line: a reference may wrap, inside a docstring or across ``#`` comments."""
    return re.sub(r"\s+", " ", re.sub(r"\n[ \t]*#[ \t]*", " ", text))


def _headings(md: Path) -> list[str]:
    return [re.sub(r"^#+\s*", "", line).strip().lower()
            for line in md.read_text().splitlines() if line.startswith("#")]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _name(f: Path, root: Path) -> str:
    return str(f.relative_to(root) if f.is_relative_to(root) else f)


def find_broken(files: list[Path], docs: Path) -> list[str]:
    """One line per reference that does not resolve or points into the notebook:
    ``FILE: docs/NAME.md[, "section"]`` or ``FILE: [..](TARGET)``."""
    broken = []
    for f in files:
        text = f.read_text(errors="replace")
        flat = _flat(text)
        for m in _NOTEBOOK.finditer(flat):
            broken.append(f"{_name(f, ROOT)}: {flat[m.start():m.start() + 60]} (the notebook is not part of the docs)")
        for m in _REF.finditer(flat):
            if m["file"].startswith("notebook/"):
                continue
            md = docs / m["file"]
            where = f"{_name(f, ROOT)}: {m[0]}"
            if not md.is_file():
                broken.append(where)
            elif m["section"] and not any(m["section"].strip().lower().rstrip(".,") in h
                                          for h in _headings(md)):
                broken.append(where)
        if f.suffix == ".md":
            for m in _LINK.finditer(text):
                target = m["target"]
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                    continue
                dest = f.parent / target
                if not dest.exists():
                    broken.append(f"{_name(f, ROOT)}: ({target})")
                elif m["anchor"] and dest.suffix == ".md" and m["anchor"] not in {
                        _anchor(h) for h in _headings(dest)}:
                    broken.append(f"{_name(f, ROOT)}: ({target}#{m['anchor']})")
    return broken


def reports_against_targets(files: list[Path]) -> list[str]:
    """One line per phrase of a doc that reports a figure against a target."""
    return [f"{_name(f, ROOT)}: {m[0]}" for f in files if f.suffix == ".md"
            for m in _TARGET.finditer(_flat(f.read_text(errors="replace")))]


def test_every_doc_reference_resolves():
    assert find_broken(_sources(), ROOT / "docs") == []


def test_no_doc_reports_against_a_target():
    assert reports_against_targets([ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]) == []


def test_an_anchor_must_name_a_heading(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## The robot's width, `--track-size`\n")
    (docs / "b.md").write_text("[w](a.md#the-robots-width---track-size) [x](a.md#measured)\n")
    assert find_broken([docs / "b.md"], docs) == [f"{docs / 'b.md'}: (a.md#measured)"]


def test_a_report_against_a_target_is_caught(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("Reach the targets (1, 1), (3, 1).\n")
    assert reports_against_targets([doc]) == []
    doc.write_text("IoU 0.85: target met.\n## Where the targets stand\nTarget: ≥ 0.85, **not met**.\n")
    assert len(reports_against_targets([doc])) == 4


def test_a_moved_section_is_caught(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## Depth damping\n\n![plot](img/p.png)\n")
    (docs / "img").mkdir()
    (docs / "img" / "p.png").write_bytes(b"")
    code = tmp_path / "m.py"
    code.write_text('"""See docs/a.md, "Depth damping", and docs/a.md."""\n'
                    '# wrapped: docs/a.md, "Depth\n# damping"\n')
    assert find_broken([code, docs / "a.md"], docs) == []
    code.write_text('"""docs/a.md, "Ground prior"; docs/b.md"""\n'
                    '# in docs/a.md ("Flat ends") and (`docs/a.md` "Depth fog")\n')
    assert len(find_broken([code], docs)) == 4
    (docs / "c.md").write_text("# C\n\n[gone](img/q.png) [web](https://example.org) [here](#c)\n")
    assert len(find_broken([docs / "c.md"], docs)) == 1


def test_the_notebook_is_neither_required_nor_allowed(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n")
    code = tmp_path / "m.py"
    code.write_text('"""Measured: docs/a.md."""\n')
    assert find_broken([code], docs) == []
    code.write_text('"""Measured: docs/notebook/tracker.md, "Depth damping"; docs/notebook/x.json."""\n')
    assert len(find_broken([code], docs)) == 2
