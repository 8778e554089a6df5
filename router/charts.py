"""The routing confusion matrix as a PNG: counts in each cell, shaded by the share of their row."""

from __future__ import annotations

from pathlib import Path

from router.evaluate import RoutingEvalReport


def confusion_png(report: RoutingEvalReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts = np.array(report.confusion.counts, dtype=float)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    names = [f"{label}: {key}" for label, key in zip(report.confusion.labels, report.confusion.keys)]
    size = 2.5 + 0.7 * len(names)
    fig, ax = plt.subplots(figsize=(size + 2.5, size))
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(names)), [n.split(":")[0] for n in names])
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("routed to")
    ax.set_ylabel("lacking (from factory analyze)")
    for i in range(len(names)):
        for j in range(len(names)):
            if counts[i, j]:
                ax.text(j, i, f"{int(counts[i, j])}", ha="center", va="center", color="white" if shares[i, j] > 0.5 else "black")
    accuracy = "n/a" if report.accuracy is None else f"{report.accuracy:.1%}"
    ax.set_title(f"Routing: {report.correct}/{report.n_evaluated} correct ({accuracy})")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of row")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
