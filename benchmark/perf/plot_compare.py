"""One PNG for a comparison against peers: horizontal bar panels (three a row), one per measure.

Used by the compare_*/coco_eval_peers scripts' --plot option. Each panel is
    (title, unit, {label: value}, better)   with better "lower" or "higher";
the first label is this project's; every other bar is annotated with its ratio to it, phrased
so that a number above 1 means the project is ahead ("17.6x slower", "0.73x the memory").
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OURS = "#1f77b4"
PEER = "#ff7f0e"


def _fmt(v):
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def plot_comparison(path, title, panels, note=""):
    n = len(panels)
    cols = min(n, 3)
    grid_rows = (n + cols - 1) // cols
    bars = max(len(values) for _, _, values, _ in panels)
    fig, axes = plt.subplots(grid_rows, cols, figsize=(4.8 * cols + 0.6, (0.55 * bars + 1.6) * grid_rows + 0.4),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.axis("off")
    for ax, (ptitle, unit, values, better) in zip(flat, panels):
        labels = list(values)
        vals = [values[k] for k in labels]
        colors = [OURS] + [PEER] * (len(labels) - 1)
        y = list(range(len(labels)))[::-1]
        ax.barh(y, vals, color=colors, height=0.6)
        ax.set_yticks(y, labels)
        ax.set_xlabel(f"{unit} ({better} is better)")
        ax.set_title(ptitle, fontsize=10)
        top = max(vals) if vals else 1
        ax.set_xlim(0, top * 1.45 if top > 0 else 1)
        ours = vals[0]
        for yi, label, v in zip(y, labels, vals):
            text = _fmt(v)
            if label != labels[0] and ours > 0 and v > 0:
                if better == "lower":
                    text += f"  ({v / ours:.1f}x ours)"
                else:
                    text += f"  (ours is {ours / v:.2f}x this)"
            ax.text(v + top * 0.02, yi, text, va="center", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
