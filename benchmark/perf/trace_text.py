"""trace_summary.py's text: the PROFILE headline line of each side and the tables, side by side
(trace_summary.summarize's dicts in, text out; JSON and the standard library only)."""

TOP_KERNELS = 25  # the tables list this many kernels (trace_summary keeps as many) ...
TOP_GAPS = 15     # ... and idle gaps


def _f(v, scale=1.0, fmt=".1f"):
    return "-" if v is None else format(v / scale, fmt)


def headline(s):
    """One PROFILE line: the side's headline figures (medians over its steps)."""
    m = s["median"]
    fields = [f"label={s['label']}", f"steps={s['steps']}", f"wall_ms={_f(m['wall_us'], 1e3, '.2f')}",
              f"gpu_busy_ms={_f(m['gpu_busy_us'], 1e3, '.2f')}", f"gpu_idle_ms={_f(m['gpu_idle_us'], 1e3, '.2f')}",
              f"kernels={_f(m['kernels'], 1, '.0f')}", f"launches={_f(m['launches'], 1, '.0f')}",
              f"syncs={_f(m['syncs'], 1, '.0f')}", f"sync_wait_ms={_f(m['sync_wait_us'], 1e3, '.2f')}",
              f"aten_ops={m['aten_ops']:.0f}", f"aten_top_level={m['aten_ops_top_level']:.0f}",
              f"host_after_read_ms={_f(m.get('host_after_read_us'), 1e3, '.2f')}"]
    return "PROFILE " + " ".join(fields)


def _width(summaries):
    """The width of one side's column: its label's, at least 14."""
    return max(14, *(len(s["label"]) + 2 for s in summaries))


def _median_table(summaries):
    """The lines naming the traces, then the medians side by side, each step's wall time, the PROFILE lines."""
    out = []
    p = out.append
    labels = [s["label"] for s in summaries]
    w = _width(summaries)
    p("== " + ", ".join(f"{s['label']}: {s['trace']} ({s['steps']} steps of {s['step_name']})" for s in summaries))
    for s in summaries:
        if not s["gpu"]:
            p(f"   {s['label']}: no GPU activity in this trace (a CPU run): GPU busy and idle time, kernels, "
              f"launches and syncs are absent (shown as -)")
    p(f"{'medians per step':34s}" + "".join(f"{x:>{w}s}" for x in labels))
    rows = [("wall (ms)", "wall_us", 1e3, ".2f"), ("GPU busy (ms)", "gpu_busy_us", 1e3, ".2f"),
            ("GPU idle (ms)", "gpu_idle_us", 1e3, ".2f"), ("kernels", "kernels", 1, ".0f"),
            ("kernel launches", "launches", 1, ".0f"), ("host syncs", "syncs", 1, ".0f"),
            ("host sync wait (ms)", "sync_wait_us", 1e3, ".2f"), ("ATen ops (all)", "aten_ops", 1, ".0f"),
            ("ATen ops (top-level)", "aten_ops_top_level", 1, ".0f")]
    for title, key, scale, fmt in rows:
        p(f"{title:34s}" + "".join(f"{_f(s['median'][key], scale, fmt):>{w}s}" for s in summaries))
    for s in summaries:
        p(f"{'wall per step (ms), ' + s['label']:34s}" + " ".join(f"{r['wall_us'] / 1e3:.1f}" for r in s["per_step"]))
    for s in summaries:
        p(headline(s))
    return out


def _side_by_side(summaries, title, names, cols):
    """The lines of a table of rows `names` with, per side, the columns cols = [(header, fn(summary, name))]."""
    w = _width(summaries)
    out = ["", title]
    out.append(f"  {'':40s}" + "".join(f"{s['label'][:11] + ' ' + h:>{max(w, len(h) + 13)}s}"
                                      for s in summaries for h, _ in cols))
    for name in names:
        out.append(f"  {name[:40]:40s}" + "".join(f"{fn(s, name):>{max(w, len(h) + 13)}s}"
                                                  for s in summaries for h, fn in cols))
    return out


def _shared_tables(summaries):
    """The lines of the tables both sides share: per scope, per kernel category (with a GPU side), host path ops."""
    scope_names = sorted(set().union(*(s["scopes"] for s in summaries)))
    out = _side_by_side(summaries, "per mrcnn:: scope, inclusive (ms per step)", scope_names,
                        [("host", lambda s, n: _f(s["scopes"].get(n, {}).get("host_us_per_step"), 1e3, ".2f")),
                         ("GPU", lambda s, n: _f(s["scopes"].get(n, {}).get("gpu_us_per_step"), 1e3, ".2f"))])
    if any(s["gpu"] for s in summaries):
        # Largest first; equal times by name, so the table does not depend on the set's hash order.
        cats = sorted(set().union(*(s["categories"] for s in summaries)),
                      key=lambda c: (-max(s["categories"].get(c, {}).get("us_per_step", 0) for s in summaries), c))
        out += _side_by_side(summaries, "GPU time by kernel category (ms per step, share)", cats,
                             [("ms", lambda s, c: _f(s["categories"].get(c, {}).get("us_per_step"), 1e3, ".2f")),
                              ("share", lambda s, c: _f(s["categories"].get(c, {}).get("share"), 0.01, ".0f") + "%"
                               if c in s["categories"] else "-")])
    out += _side_by_side(summaries, "CPU time of the host path's ops (us per step)",
                         list(summaries[0]["cpu_self_time"]),
                         [("calls", lambda s, n: _f(s["cpu_self_time"][n]["calls_per_step"], 1, ".0f")),
                          ("self", lambda s, n: _f(s["cpu_self_time"][n]["self_us_per_step"], 1, ".0f"))])
    return out


def _host_op_table(s):
    """The lines of one side's top host ops by self time."""
    out = ["", f"{s['label']}: top host ops by self time (us per step)"]
    for r in s["host_ops"][:15]:
        out.append(f"  {r['name'][:60]:60s} {r['calls_per_step']:7.0f} calls {r['self_us_per_step']:10.0f} self "
                   f"{r['total_us_per_step']:10.0f} total")
    return out


def _gpu_tables(s):
    """The lines of a GPU side's top kernels, its median step's largest idle gaps and its host syncs."""
    out = ["", f"{s['label']}: top {TOP_KERNELS} kernels (per step: calls, total us; per call: mean/min/max us)"]
    p = out.append
    for r in s["kernels"][:TOP_KERNELS]:
        p(f"  {r['category'][:18]:18s} {r['calls_per_step']:6.0f} {r['total_us_per_step']:10.0f} "
          f"{r['mean_us']:8.1f} {r['min_us']:8.1f} {r['max_us']:8.1f}  {r['name'][:90]}")
    step = s["per_step"][s["median_step"]]
    p(f"{s['label']}: the {TOP_GAPS} largest GPU idle gaps of step {s['median_step']} (the median step): "
      f"at (us from the step's start), length, host op and scope when it opened, the kernel that closed it")
    for g in step["top_gaps"]:
        p(f"  {g['start_us']:10.0f} {g['us']:9.0f}  {str(g['op'])[:40]:40s} {str(g['scope'])[:24]:24s} "
          f"-> {str(g['next_kernel'])[:50]}")
    p(f"{s['label']}: host syncs (per step: count, wait us; max us), by call, op and scope")
    for r in s["syncs"][:12]:
        p(f"  {r['count_per_step']:5.1f} {r['wait_us_per_step']:10.0f} {r['max_us']:9.0f}  "
          f"{r['name']:22s} {str(r['op'])[:40]:40s} {r['scope']}")
    return out


def _conv_table(s):
    """The lines of one side's convolutions by shape: GPU us and TFLOP/s, or on the CPU host us and GFLOP/s."""
    out = [""]
    if s["gpu"]:
        out.append(f"{s['label']}: convolutions by shape (GPU us per step and TFLOP/s: fprop, dgrad, wgrad)")
        for r in s["convs"][:15]:
            out.append(f"  {r['shape'][:58]:58s} " + " ".join(
                f"{r[f'{d}_gpu_us_per_step']:8.0f} {_f(r[f'{d}_tflops'], 1, '5.1f'):>5s}"
                for d in ("fprop", "dgrad", "wgrad")))
    else:
        out.append(f"{s['label']}: convolutions by shape (host us per step forward, backward; GFLOP/s)")
        for r in s["convs"][:15]:
            out.append(f"  {r['shape'][:58]:58s} {r['fwd_host_us_per_step']:9.0f} {r['bwd_host_us_per_step']:9.0f} "
                       f"{_f(r['host_gflops'], 1, '.1f'):>7s}")
    return out


def text(summaries):
    """The readable summary: the sides' headline figures side by side, then their tables."""
    out = _median_table(summaries) + _shared_tables(summaries)
    for s in summaries:
        out += _host_op_table(s)
    for s in summaries:
        if s["gpu"]:
            out += _gpu_tables(s)
    for s in summaries:
        if s["convs"]:
            out += _conv_table(s)
    return "\n".join(out) + "\n"
