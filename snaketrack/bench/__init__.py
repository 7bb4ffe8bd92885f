"""Benchmarks: the measurements behind the figures the docs quote, run by ``snaketrack bench NAME``.

:mod:`snaketrack.bench.registry` finds the benchmarks (one module each in
:mod:`snaketrack.bench.suite`), :mod:`snaketrack.bench.cache` is the folder
their rendered clips are kept in, and the other modules here hold the
measuring code the benchmarks share (the tracker's benchmark clips and runs,
the IoU ceilings, the pose floor, the body-width sweep, the renderer's
timings, the live service's rate).
"""
