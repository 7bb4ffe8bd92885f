# Two entry points for a newcomer: `make demo` and `make test`.
# Both create .venv when missing and install the pinned dependencies.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: demo test test-slow lint venv clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/snaketrack demo --out demo_out

lint: $(STAMP)
	$(BIN)/ruff check snaketrack tests scripts

test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile snaketrack tests

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

clean:
	rm -rf demo_out .pytest_cache
