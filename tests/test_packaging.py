"""pyproject.toml declares what snaketrack imports: every third-party import of the package's sources (read with
``ast``) maps, through the installed distributions, to a dependency of the core or of an extra; the extras match
:data:`snaketrack.extras.EXTRAS`; requirements.txt pins them all (but :data:`OWN_ENVIRONMENT`); a command whose
extra is missing says which to install, in one line, and exits 2."""
import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from snaketrack.extras import EXTRAS, install_command

tomllib = pytest.importorskip("tomllib")  # the standard library's from Python 3.11

ROOT = Path(__file__).resolve().parents[1]
#: imported, and declared by no one, for a reason: the import name → why
UNDECLARED = {"triton": "torch's own dependency, imported only to load it before MuJoCo's EGL context"}
#: pinned in requirements.txt, imported by no source: the distribution → why
PINNED_ONLY = {"torchvision": "segmentation-models-pytorch's encoders, the build of this torch",
               "timm": "segmentation-models-pytorch's encoders"}
#: declared, and pinned in an environment of its own rather than in requirements.txt: the distribution → why
OWN_ENVIRONMENT = {"easypytorch3d": "built against one torch release: requirements-pytorch3d.txt, .venv-pytorch3d"}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1)).lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _extras() -> dict[str, set[str]]:
    return {extra: {_name(r) for r in reqs if _name(r) != "snaketrack"}
            for extra, reqs in _project()["optional-dependencies"].items()}


def third_party_imports(root: Path) -> dict[str, list[str]]:
    """Top-level names of the absolute imports in ``root``'s ``.py`` files outside the standard library and
    the package itself → the files (relative to ``root``'s parent) that import them."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != root.name:
                    found.setdefault(top, []).append(str(path.relative_to(root.parent)))
    return found


def undeclared(imports: dict[str, list[str]], declared: set[str]) -> dict[str, str]:
    """The imports whose distribution (the installed one that provides the name; for an extra's module not
    installed here, the one :data:`EXTRAS` names) is not in ``declared``: import name → its distribution(s),
    or ``not installed``."""
    providers = importlib.metadata.packages_distributions()
    named = {module: dist for modules in EXTRAS.values() for module, dist in modules.items()}
    out = {}
    for name in imports:
        if name in UNDECLARED:
            continue
        dists = {_name(d) for d in providers.get(name, [named[name]] if name in named else [])}
        if not dists:
            out[name] = "not installed"
        elif not dists & declared:
            out[name] = ", ".join(sorted(dists))
    return out


def test_every_third_party_import_is_declared_by_the_core_or_an_extra():
    imports = third_party_imports(ROOT / "snaketrack")
    assert {"numpy", "torch", "cv2", "foxglove", "ray"} <= set(imports)  # the scan sees the package's imports
    declared = {_name(r) for r in _project()["dependencies"]}.union(*_extras().values())
    missing = undeclared(imports, declared)
    assert not missing, {name: (dist, imports[name][:3]) for name, dist in missing.items()}


def test_the_core_alone_leaves_the_extras_imports_undeclared():
    """The check fails where it should: without the extras, their imports are reported, and nothing else."""
    imports = third_party_imports(ROOT / "snaketrack")
    missing = undeclared(imports, {_name(r) for r in _project()["dependencies"]})
    assert set(missing) == {module for modules in EXTRAS.values() for module in modules}


def test_the_extras_are_the_ones_the_commands_name():
    extras = _extras()
    for extra, modules in EXTRAS.items():
        assert {_name(d) for d in modules.values()} == extras[extra], extra
    providers = importlib.metadata.packages_distributions()
    for modules in EXTRAS.values():
        for module, dist in modules.items():  # the distribution named is the one that provides the module
            assert _name(dist) in {_name(d) for d in providers.get(module, [dist])}, module


def test_the_extras_are_imported_only_where_they_are_needed():
    """A module of the core imports an extra inside a function, so that the core imports without it."""
    optional = {module for modules in EXTRAS.values() for module in modules}
    for path in sorted((ROOT / "snaketrack").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # the module's top level only
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module.split(".")[0]]
            else:
                continue
            assert not optional & set(names), f"{path.relative_to(ROOT)}: imports {names} at its top level"


def test_requirements_pin_every_declared_distribution_and_only_what_is_needed():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.txt: {line} is not pinned"
            pins[_name(name)] = version
    declared = {_name(r) for r in _project()["dependencies"]}.union(*_extras().values()) - set(OWN_ENVIRONMENT)
    assert declared - set(pins) == set()
    assert set(pins) - declared == set(PINNED_ONLY)
    for dist, version in pins.items():  # the pins are what this environment runs
        assert importlib.metadata.version(dist) == version, dist


def _fail_import(monkeypatch, module: str) -> None:
    """Make ``import module`` raise ImportError, as when its distribution is not installed."""
    for name in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


@pytest.mark.parametrize("argv, module, extra", [
    (["serve", "demo_out/drone-video"], "foxglove", "service"),
    (["listen", "ws://127.0.0.1:9"], "websockets", "service"),
    (["batch", "campaign.yaml", "--out", "out"], "ray", "batch"),
])
def test_a_command_whose_extra_is_missing_names_it_in_one_line(monkeypatch, capsys, argv, module, extra):
    from snaketrack.cli import main

    _fail_import(monkeypatch, module)
    assert main(argv) == 2
    err = capsys.readouterr().err
    dist = EXTRAS[extra][module]
    assert err == f"snaketrack: error: {argv[0]} needs {dist}, which is not installed: {install_command(extra)}\n"


def test_the_sam_backend_without_its_extra_names_it(monkeypatch, tmp_path):
    from snaketrack.extras import MissingExtraError
    from snaketrack.labelling.backends import build_backend

    _fail_import(monkeypatch, "segment_anything")
    checkpoint = tmp_path / "sam.pth"
    checkpoint.write_bytes(b"")
    with pytest.raises(MissingExtraError, match=re.escape("pip install 'snaketrack[sam]'")):
        build_backend("sam", sam_checkpoint=str(checkpoint))
