"""The benchmarks, one module each; each defines ``BENCHMARK`` (:class:`snaketrack.bench.registry.Benchmark`)."""
