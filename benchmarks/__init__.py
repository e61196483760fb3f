"""Start-up and throughput benchmarks of the frozen guard against reference plugins.

`python -m benchmarks` measures (it builds nothing: run tools/build.sh first) and prints a table;
the figures also go to benchmarks/results/latest.json.
"""
