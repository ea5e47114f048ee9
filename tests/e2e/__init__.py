"""End-to-end tests of run.sh: the real build, orders-server, httpload, tailtrace, perf and analysis."""
