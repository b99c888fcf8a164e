"""annotation_load_peers.py's report: the figures summarized per reader, the markdown table, the
goals checked and the plot (its measurement dicts in, text and a PNG out)."""
import statistics

LABELS = {"pycocotools": "pycocotools COCO()", "torchvision": "torchvision CocoDetection + filter",
          "harness-json": "harness, JSON", "harness-index": "harness, prepared index"}
SHORT = {"pycocotools": "pycocotools\nCOCO()", "torchvision": "torchvision\nCocoDetection\n+ filter",
         "harness-json": "harness\nJSON", "harness-index": "harness\nindex"}
GiB = 1024 ** 3
MB = 1e6


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_s(x):
    return "–" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def fmt_n(x):
    return "–" if x is None else f"{x:,}"


def fmt_b(x):
    return "–" if x is None else f"{x / GiB:.2f} GiB" if x >= GiB else f"{x / 2**20:.0f} MiB"


def summarize(res):
    """Medians of the 1-rank runs, totals of the N-rank run."""
    one = [r for r in res.get("one_rank_runs", []) if "seconds" in r]
    s = {}
    if one:
        s["seconds"] = median(r["seconds"] for r in one)
        s["seconds_min"], s["seconds_max"] = min(r["seconds"] for r in one), max(r["seconds"] for r in one)
        s["wall_s"] = median(r["wall_s"] for r in one)
        s["max_rss_bytes"] = median(r["max_rss_bytes"] for r in one)
        s["pss_bytes"] = median(r.get("pss_all_alive_bytes", r["pss_bytes"]) for r in one)
        s["images"], s["instances"] = one[0]["images"], one[0]["instances"]
        s["runs"] = len(one)
    ranks = res.get("ranks_run") or []
    ok = [r for r in ranks if "seconds" in r]
    if ranks and len(ok) == len(ranks):
        s["ranks"] = len(ranks)
        s["ranks_wall_to_last_ready_s"] = res["ranks_wall"]
        s["ranks_max_rss_per_rank_bytes"] = max(r["max_rss_bytes"] for r in ok)
        s["ranks_pss_sum_bytes"] = sum(r.get("pss_all_alive_bytes", r["pss_bytes"]) for r in ok)
        s["ranks_seconds_median"] = median(r["seconds"] for r in ok)
        if s.get("pss_bytes"):
            # The "8 ranks together <= 2x one rank", on what the node really holds.
            s["ranks_pss_sum_over_one"] = s["ranks_pss_sum_bytes"] / s["pss_bytes"]
    b = res.get("baseline")
    if b:
        s["base_max_rss_bytes"] = b["one_rank"]["max_rss_bytes"]
        s["base_pss_bytes"] = b["one_rank"].get("pss_all_alive_bytes", b["one_rank"]["pss_bytes"])
        per = sum(r.get("pss_all_alive_bytes", r["pss_bytes"]) for r in b["ranks"]) / len(b["ranks"])
        s["base_pss_per_rank_of_many_bytes"] = per
        if s.get("ranks_pss_sum_bytes") and s.get("pss_bytes"):
            # Each side less its fixed cost: the annotations' own memory, 1 rank against N.
            d1 = s["pss_bytes"] - s["base_pss_bytes"]
            dn = s["ranks_pss_sum_bytes"] - s["ranks"] * per
            s["data_pss_1_bytes"], s["data_pss_sum_bytes"] = d1, dn
            if d1 > 0:
                s["data_pss_sum_over_one"] = dn / d1
    return s


def markdown(report):
    n = report["ranks_requested"]
    lines = [
        f"| reader | training-ready, 1 rank (s) | process wall, 1 rank (s) | peak RSS, 1 rank | PSS, 1 rank "
        f"| {n} ranks: wall to last ready (s) | {n} ranks: peak RSS per rank | {n} ranks: PSS sum "
        f"| PSS sum / 1 rank | images | instances |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind in report["readers"]:
        res = report["results"][kind]
        if res.get("status") != "ok":
            lines.append(f"| {LABELS[kind]} | {res.get('status')} |" + " |" * 9)
            continue
        s = res["summary"]
        rk = s.get("ranks")
        rk_note = "" if rk in (None, n) else f" ({rk} ranks)"
        ratio = s.get("ranks_pss_sum_over_one")
        lines.append(
            f"| {LABELS[kind]} | {fmt_s(s.get('seconds'))} ({fmt_s(s.get('seconds_min'))}–{fmt_s(s.get('seconds_max'))}) "
            f"| {fmt_s(s.get('wall_s'))} | {fmt_b(s.get('max_rss_bytes'))} | {fmt_b(s.get('pss_bytes'))} "
            f"| {fmt_s(s.get('ranks_wall_to_last_ready_s'))}{rk_note} | {fmt_b(s.get('ranks_max_rss_per_rank_bytes'))} "
            f"| {fmt_b(s.get('ranks_pss_sum_bytes'))} | {'–' if ratio is None else f'{ratio:.2f}x'} "
            f"| {fmt_n(s.get('images'))} | {fmt_n(s.get('instances'))} |")
    base = [(k, report["results"][k]["summary"]) for k in report["readers"]
             if report["results"][k].get("summary", {}).get("base_pss_bytes") is not None]
    if base:
        lines.append(f"\nFixed cost of a process, the same readers on a {report.get('baseline_images', 0):,}-image file "
                     "(peak RSS / PSS of 1 rank / PSS per rank of " + str(n) + "): " + "; ".join(
                         f"{LABELS[k]} {fmt_b(s['base_max_rss_bytes'])} / {fmt_b(s['base_pss_bytes'])} / "
                         f"{fmt_b(s['base_pss_per_rank_of_many_bytes'])}" for k, s in base) + ".")
    p = report.get("prepare")
    if p:
        if "error" in p or p.get("status"):
            lines.append(f"\n`data prepare`: {p.get('status') or p.get('error')}")
        else:
            files = ", ".join(f"`{f}` {b:,} bytes" for f, b in sorted(p["files"].items()))
            lines.append(f"\n`data prepare` (once, before the clock): {p['wall_s']:.1f} s, peak RSS "
                         f"{fmt_b(p['max_rss_bytes'])}; wrote {files or 'no new file in annotations/'}.")
    notes = list(report.get("notes", []))
    for k, extra in report.get("exit_peaks", {}).items():
        notes.append(f"{LABELS[k]}: the peak RSS figures are the process's own at training-ready; over its "
                     f"whole life (wait4) it peaks up to {fmt_b(extra)} higher, after it was ready (at exit).")
    if notes:
        lines.append("")
        lines += [f"- {x}" for x in notes]
    return "\n".join(lines)


def goals(report):
    """The issue's goals, checked where the harness has figures."""
    out = []
    rs = report["results"]
    for kind, limit in (("harness-index", 1.0), ("harness-json", 5.0)):
        s = rs.get(kind, {}).get("summary", {})
        if s.get("seconds") is not None:
            out.append(f"{LABELS[kind]}: training-ready in {s['seconds']:.2f} s, goal under {limit:g} s: "
                       f"{'met' if s['seconds'] < limit else 'not met'}")
    for kind in ("harness-json", "harness-index"):
        s = rs.get(kind, {}).get("summary", {})
        if s.get("ranks_pss_sum_bytes") is not None:
            per, rss = s["ranks_pss_sum_bytes"] / s["ranks"], s["ranks_max_rss_per_rank_bytes"]
            # Peak RSS counts a shared mapping in full in every rank; PSS is what a rank costs the node.
            verdict = "met" if rss <= 1e9 else "met on PSS (not on peak RSS)" if per <= 1e9 else "not met"
            out.append(f"{LABELS[kind]}: {fmt_b(rss)} peak RSS and {fmt_b(per)} PSS per rank with "
                       f"{s['ranks']} ranks, goal <= 1 GB: {verdict}")
        if s.get("ranks_pss_sum_over_one") is not None:
            r = s["ranks_pss_sum_over_one"]
            line = (f"{LABELS[kind]}: {s['ranks']} ranks together {r:.2f}x one rank (PSS, whole processes), "
                    f"goal <= 2x: {'met' if r <= 2 else 'not met'}")
            if s.get("data_pss_sum_over_one") is not None:
                d = s["data_pss_sum_over_one"]
                line += (f"; the annotations alone (each process's fixed cost on the tiny file subtracted: "
                         f"{fmt_b(s['data_pss_sum_bytes'])} for {s['ranks']} ranks against {fmt_b(s['data_pss_1_bytes'])}) "
                         f"{d:.2f}x: {'met' if d <= 2 else 'not met'}")
            out.append(line)
    return out


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    kinds = report["readers"]
    n = report["ranks_requested"]
    S = [report["results"][k].get("summary", {}) for k in kinds]
    x = np.arange(len(kinds))
    # A reader that ran fewer ranks than asked (memory) says so on its bars.
    fewer = ["" if s.get("ranks") in (None, n) else f"\n({s['ranks']} ranks)" for s in S]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))

    def bars(ax, series, scale, fmt):
        for j, (lab, vals, col, many) in enumerate(series):
            v = [np.nan if y is None else y / scale for y in vals]
            b = ax.bar(x + (j - 1) * 0.27, v, 0.27, label=lab, color=col)
            ax.bar_label(b, labels=["" if np.isnan(y) else fmt(y) + (fewer[i] if many else "")
                                    for i, y in enumerate(v)], fontsize=7)

    bars(a1, [("1 rank: the load, inside the process", [s.get("seconds") for s in S], "#4c72b0", False),
              ("1 rank: from spawn", [s.get("wall_s") for s in S], "#55a868", False),
              (f"{n} ranks: from spawn to the last ready", [s.get("ranks_wall_to_last_ready_s") for s in S],
               "#dd8452", True)], 1.0, fmt_s)
    a1.axhline(5, color="gray", ls="--", lw=0.8, label="goal from JSON: 5 s")
    a1.axhline(1, color="gray", ls=":", lw=0.8, label="goal from the index: 1 s")
    a1.set_yscale("log")
    a1.set_ylim(top=a1.get_ylim()[1] * 4)   # room for the labels
    a1.set_ylabel("seconds to training-ready (log)")
    a1.set_title(f"time ({report['machine']['cores']} cores: {n} ranks time-sliced)", fontsize=10)
    bars(a2, [("peak RSS, 1 rank", [s.get("max_rss_bytes") for s in S], "#4c72b0", False),
              (f"peak RSS per rank, {n} ranks", [s.get("ranks_max_rss_per_rank_bytes") for s in S], "#dd8452", False),
              (f"PSS sum of {n} ranks (the node's total)", [s.get("ranks_pss_sum_bytes") for s in S], "#c44e52", True)],
         GiB, lambda y: f"{y:.1f}")
    a2.axhline(1e9 / GiB, color="gray", ls="--", lw=0.8, label="goal: 1 GB per rank")
    a2.set_ylabel("GiB")
    a2.set_ylim(top=a2.get_ylim()[1] * 1.15)
    a2.set_title("memory", fontsize=10)
    for ax in (a1, a2):
        ax.set_xticks(x)
        ax.set_xticklabels([SHORT[k] for k in kinds], fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
        for i, k in enumerate(kinds):
            st = report["results"][k].get("status")
            if st != "ok":
                ax.text(i, ax.get_ylim()[0], st.split(" (")[0], rotation=90, fontsize=7, ha="center", va="bottom")
    f = report["file"]
    fig.suptitle(f"training-ready COCO train2017 ({f['bytes'] / MB:.0f} MB, {f.get('images', 0):,} images, "
                 f"{f.get('instances', 0):,} instances), {report['machine']['cpu_model']} "
                 f"({report['machine']['isa']}), {report['date'][:10]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
