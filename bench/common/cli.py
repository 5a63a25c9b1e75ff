"""What the benchmarks' command lines share: where results go, the options that name them,
and the checks before a run."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench.common.steps import ROOT, BenchError

RESULTS = ROOT / "bench" / "results"


def numbers(text: str, kind: type) -> list:
    """Return the comma-separated numbers of ``text`` as ``kind``; argparse's error if not."""
    try:
        return [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None


def results_options(parser: argparse.ArgumentParser, report_help: str) -> None:
    """Add ``--out`` (the results directory) and ``--report`` (only rebuild the report)."""
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--report", action="store_true", help=report_help)


def need_root() -> None:
    """Raise BenchError unless this process is root, as sandbox pods need."""
    if os.geteuid() != 0:
        raise BenchError("the benchmark needs root (sandbox pods); run it as root")
