# Two entry points for a newcomer: `make demo` and `make test`.
# Both create .venv when missing and install the pinned dependencies.
# `make pytorch3d` creates .venv-pytorch3d, the PyTorch3D renderer's environment (its own torch pin, see
# requirements-pytorch3d.txt); `make test-pytorch3d` runs the suite there, the PyTorch3D backend's tests included.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
P3D_VENV := .venv-pytorch3d
P3D_BIN := $(P3D_VENV)/bin
P3D_STAMP := $(P3D_VENV)/.installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: demo test test-slow lint venv clean pytorch3d test-pytorch3d

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

$(P3D_STAMP): requirements-pytorch3d.txt pyproject.toml
	test -x $(P3D_BIN)/python || $(PY) -m venv $(P3D_VENV)
	$(P3D_BIN)/pip install -q --upgrade pip
	$(P3D_BIN)/pip install -q -r requirements-pytorch3d.txt
	$(P3D_BIN)/pip install -q --no-deps -e .
	$(P3D_BIN)/python scripts/check_pytorch3d_abi.py
	touch $(P3D_STAMP)

pytorch3d: $(P3D_STAMP)

test-pytorch3d: $(P3D_STAMP)
	$(P3D_BIN)/python -m pytest -q -n 2 --dist loadfile snaketrack tests

demo: $(STAMP)
	$(BIN)/snaketrack demo --out demo_out

# ruff, then the import contracts of pyproject.toml ([tool.importlinter]: the packages' layers)
lint: $(STAMP)
	$(BIN)/ruff check snaketrack tests scripts
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile snaketrack tests

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

clean:
	rm -rf demo_out .pytest_cache
