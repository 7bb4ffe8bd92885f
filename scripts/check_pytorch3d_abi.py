"""Does PyTorch3D's compiled extension link against a given torch? (the symbol check behind torch's pin in
requirements-pytorch3d.txt).

PyTorch3D's ``_C`` extension (``easypytorch3d`` wheel) calls torch's C++ API by mangled symbol name. A torch
release that renames or drops one of those symbols fails at import (``undefined symbol``) or, when the name is
forwarded by hand, at the first call. This script lists the extension's undefined symbols that torch must supply
(the ``c10``, ``at``, ``torch`` and ``caffe2`` namespaces) and looks each up among the dynamic symbols torch's
shared libraries define.

    python scripts/check_pytorch3d_abi.py                      # the torch installed beside pytorch3d
    python scripts/check_pytorch3d_abi.py --torch-lib DIR      # a candidate torch: DIR = its torch/lib folder
                                                               # (e.g. from `pip download torch==X --no-deps`
                                                               # and `unzip`)
    python scripts/check_pytorch3d_abi.py --extension PATH     # another build of _C

Prints JSON (extension, torch lib folder, symbols needed, the missing ones demangled) and exits 0 when every
symbol is there, 1 when some are missing, 2 when the files are not found. Needs binutils' ``nm`` (and
``c++filt`` for readable names).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

TORCH_NAMESPACES = ("c10", "at", "torch", "caffe2")


def dynamic_symbols(lib: Path, undefined: bool) -> set[str]:
    """The dynamic symbols of the shared library ``lib``: the undefined ones or the defined ones."""
    flag = "--undefined-only" if undefined else "--defined-only"
    out = subprocess.run(["nm", "-D", flag, str(lib)], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if parts:
            names.add(parts[-1].split("@")[0])
    return names


def demangle(names: list[str]) -> list[str]:
    if not names or shutil.which("c++filt") is None:
        return names
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def needs_torch(mangled: str, readable: str) -> bool:
    """A symbol torch supplies: one in torch's C++ namespaces (the ``_ZN3c10``-style prefix or its
    demangled form)."""
    if any(mangled.startswith(f"_ZN{len(ns)}{ns}") or mangled.startswith(f"_ZNK{len(ns)}{ns}")
           for ns in TORCH_NAMESPACES):
        return True
    return any(readable.startswith(f"{ns}::") for ns in TORCH_NAMESPACES)


def find_extension() -> Path:
    spec = importlib.util.find_spec("pytorch3d")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pytorch3d is not installed here (make pytorch3d creates .venv-pytorch3d)")
    folder = Path(list(spec.submodule_search_locations)[0])
    found = sorted(folder.glob("_C*.so"))
    if not found:
        raise FileNotFoundError(f"no compiled _C*.so in {folder}")
    return found[0]


def find_torch_lib() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("torch is not installed here")
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def check(extension: Path, torch_lib: Path) -> dict:
    """The check's record: which of the extension's torch symbols ``torch_lib``'s libraries lack."""
    libs = sorted(torch_lib.glob("lib*.so*"))
    if not libs:
        raise FileNotFoundError(f"no shared libraries in {torch_lib}")
    undefined = sorted(dynamic_symbols(extension, undefined=True))
    readable = demangle(undefined)
    needed = [(m, r) for m, r in zip(undefined, readable) if needs_torch(m, r)]
    defined: set[str] = set()
    for lib in libs:
        defined |= dynamic_symbols(lib, undefined=False)
    missing = [r for m, r in needed if m not in defined]
    return {"extension": str(extension), "torch_lib": str(torch_lib), "torch_symbols_needed": len(needed),
            "missing": missing, "links": not missing}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extension", type=Path, default=None, help="PyTorch3D's _C*.so (default: the installed one)")
    ap.add_argument("--torch-lib", type=Path, default=None,
                    help="a torch's lib folder (default: the installed torch's)")
    args = ap.parse_args(argv)
    if shutil.which("nm") is None:
        print("check_pytorch3d_abi: needs binutils' nm (apt-get install binutils)", file=sys.stderr)
        return 2
    try:
        ext = args.extension or find_extension()
        lib = args.torch_lib or find_torch_lib()
        if not ext.is_file():
            raise FileNotFoundError(f"{ext}: not found")
        res = check(ext, lib)
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        print(f"check_pytorch3d_abi: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1))
    return 0 if res["links"] else 1


if __name__ == "__main__":
    sys.exit(main())
