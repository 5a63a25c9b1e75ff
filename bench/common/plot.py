"""The fleet benchmark's plot: median time against pods, one panel per RTT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.stats import cells


def plot(raw: dict[str, Any], path: Path) -> None:
    """Write the PNG: median time against pods, one panel per RTT, min-max error bars; each
    same-work replay dotted, in its step's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = cells(raw)
    rtts = [r for r in raw["settings"]["rtts_ms"]]
    counts = raw["settings"]["pod_counts"]
    fig, axes = plt.subplots(1, len(rtts), figsize=(5.2 * len(rtts) + 2.6, 4.6), squeeze=False)
    styles = {
        "floor": ("k", "o", "floor: ssh true", "-"),
        "check": ("tab:blue", "s", "podstate check", "-"),
        "same_check": ("tab:blue", "s", "same work (OpenSSH)", ":"),
        "check_slow": ("tab:cyan", "s", "check, 1 s nvidia-smi", "--"),
        "noop": ("tab:green", "^", "noop apply", "-"),
        "same_noop": ("tab:green", "^", None, ":"),
        "reconfigure": ("tab:purple", "P", "reconfigure", "-"),
        "same_reconfigure": ("tab:purple", "P", None, ":"),
        "first": ("tab:orange", "D", "first apply", "-"),
        "same_first": ("tab:orange", "D", None, ":"),
        "plain_noop": ("tab:brown", "x", "plain pyinfra noop", "-"),
        "plain_reconfigure": ("tab:pink", "x", "plain pyinfra reconfigure", "-"),
        "ansible": ("tab:red", "v", "ansible --check", "-"),
    }
    for ax, rtt in zip(axes[0], rtts, strict=True):
        for step, (color, marker, label, line) in styles.items():
            points = [(n, table[(step, rtt, n)]) for n in counts if (step, rtt, n) in table]
            if not points:
                continue
            xs = [n for n, _ in points]
            ys = [c.median for _, c in points]
            err = [[c.median - c.low for _, c in points], [c.high - c.median for _, c in points]]
            ax.errorbar(
                xs, ys, yerr=err, color=color, marker=marker, label=label, capsize=3, linestyle=line
            )
        ax.set_yscale("log")
        ax.set_xticks(counts)
        ax.set_xlabel("pods")
        ax.set_ylabel("seconds (median; bars: min–max)")
        ax.set_title(f"{rtt:g} ms RTT" if rtt else "0 ms RTT (local work only)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1))
    m = raw["machine"]
    fig.suptitle(f"podstate fleet benchmark — {m['cores']} cores, {m['cpu']}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
