"""Every reference to a doc in the code and the docs points at something that is there.

A reference is ``docs/NAME.md``, optionally followed by a quoted section (``docs/tracker.md,
"Depth damping"``: some heading of that file contains the quoted words) or a rule
(``docs/tracker.md, rule C2``: the file names that rule). Moving a section without its readers
fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".git", "demo_out", "build", "node_modules", ".pytest_cache"}

_REF = re.compile(
    r'docs/(?P<file>[\w./-]+?\.md)'
    r'`?(?:,?\s*\(?(?:"(?P<section>[^"]{3,120})"|rules?\s+(?P<rule>[A-Z]\d?)\b))?')


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


def find_broken(files: list[Path], docs: Path) -> list[str]:
    """One line per reference that does not resolve: ``FILE: docs/NAME.md[, "section" | rule X]``."""
    broken = []
    for f in files:
        for m in _REF.finditer(_flat(f.read_text(errors="replace"))):
            md = docs / m["file"]
            where = f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}: {m[0]}"
            if not md.is_file():
                broken.append(where)
            elif m["section"] and not any(m["section"].strip().lower().rstrip(".,") in h
                                          for h in _headings(md)):
                broken.append(where)
            elif m["rule"] and not re.search(rf"\brules?\s+(?:[A-Z]\d?,?\s+)*{m['rule']}\b",
                                             md.read_text(), re.IGNORECASE):
                broken.append(where)
    return broken


def test_every_doc_reference_resolves():
    assert find_broken(_sources(), ROOT / "docs") == []


def test_a_moved_section_is_caught(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## Depth damping\n\nRule C2 draws cylinders.\n")
    code = tmp_path / "m.py"
    code.write_text('"""See docs/a.md, "Depth damping", and docs/a.md, rule C2."""\n'
                    '# wrapped: docs/a.md, "Depth\n# damping"\n')
    assert find_broken([code], docs) == []
    code.write_text('"""docs/a.md, "Ground prior"; docs/a.md, rule X; docs/b.md"""\n'
                    '# in docs/a.md ("Flat ends") and (`docs/a.md` "Depth fog")\n')
    assert len(find_broken([code], docs)) == 5
