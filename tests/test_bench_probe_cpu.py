"""bench/fleet/probe_cpu.py: the probe's CPU in a PID namespace of its own, beside N processes."""

from __future__ import annotations

from bench.fleet import probe_cpu


def test_the_probe_is_measured_in_a_namespace_of_its_own_and_reported():
    low = probe_cpu.measure(0, runs=1)
    high = probe_cpu.measure(100, runs=1)
    assert 0 < low[0] and low[1] == low[0] == low[2]
    assert high[0] > low[0]  # a hundred more processes to read, a few hundred reads each
    page = probe_cpu.report([(0, low), (100, high)])
    assert "| 0 | " in page and "| 100 | " in page and "probe_cpu" in page
