"""The `report` (and `forecast`) HTML page opened in headless Chromium, shared by their tests.

check(page, systems) loads the page with a probe script, then asserts that:
  - it renders with its title, and every inline plot has a size;
  - every number in a table cell (td[data-field]) equals the JSON report's field it names
    (rounded as shown); a missing value is shown as "-" or "not logged";
  - no two text labels of a plot overlap: the bounding boxes of every <text> of each inline SVG,
    as the browser laid them out, intersect pairwise by no more than half a pixel, and every label
    lies inside its plot (none cut off at an edge);
and writes a screenshot beside the page (screenshot.png). Returns the probe's findings, or None
(with the reason printed) where Chromium is not installed.
"""
import html
import json
import re
import shutil
import subprocess

PROBE = """<pre id="probe"></pre><script>
window.addEventListener('load', () => {
  const svgs = [...document.querySelectorAll('figure > svg')].map(svg => {
    const r = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].map(t => {
      const b = t.getBoundingClientRect();
      return {text: t.textContent, x: b.left, y: b.top, w: b.width, h: b.height};
    });
    return {id: svg.parentElement.id, x: r.left, y: r.top, w: r.width, h: r.height, texts};
  });
  const cells = [...document.querySelectorAll('td[data-field]')].map(
      c => ({system: c.dataset.system, field: c.dataset.field, text: c.textContent}));
  document.getElementById('probe').textContent = JSON.stringify({svgs, cells, title: document.title});
});
</script></body>"""

MISSING = ("-", "not logged")


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def overlaps(texts, slack=0.5):
    """Pairs of labels whose boxes intersect by more than `slack` pixels both ways."""
    found = []
    boxes = [t for t in texts if t["w"] > 0 and t["h"] > 0]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > slack and dy > slack:
                found.append((a["text"], b["text"]))
    return found


def field_value(system, field):
    value = system
    for part in field.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def check(page, systems, min_cells_per_system=10, title="mlperf-maskrcnn report"):
    """`systems`: the JSON report's systems by label (their name where no two share one); for the
    forecast page, its JSON forecasts by target name (title "mlperf-maskrcnn forecast")."""
    browser = chromium()
    if browser is None:
        print("SKIP browser check: chromium is not installed (run_scripts/bootstrap.sh --test installs it)")
        return None
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files",
             "--virtual-time-budget=10000"]
    p = subprocess.run([browser, *flags, "--window-size=1500,1000", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=300)
    m = re.search(r'<pre id="probe">(.*?)</pre>', p.stdout, re.S)
    assert m and m.group(1), f"the page did not render in chromium:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    got = json.loads(html.unescape(m.group(1)))
    assert got["title"] == title, got["title"]
    assert got["svgs"] and all(s["w"] > 100 and s["h"] > 100 for s in got["svgs"]), [(s["id"], s["w"], s["h"]) for s in got["svgs"]]
    labels = 0
    for s in got["svgs"]:
        bad = overlaps(s["texts"])
        assert not bad, f"{s['id']}: overlapping labels {bad[:5]}"
        cut = [t["text"] for t in s["texts"] if t["w"] > 0 and (t["x"] < s["x"] - 1 or t["x"] + t["w"] > s["x"] + s["w"] + 1
                                                                 or t["y"] < s["y"] - 1 or t["y"] + t["h"] > s["y"] + s["h"] + 1)]
        assert not cut, f"{s['id']}: labels cut off at the plot's edge: {cut[:5]}"
        labels += len(s["texts"])
    checked = 0
    for c in got["cells"]:
        value = field_value(systems[c["system"]], c["field"])
        if value is None:
            assert c["text"] in MISSING, c
            continue
        shown = float(c["text"])
        decimals = len(c["text"].split(".")[1]) if "." in c["text"] else 0
        assert abs(shown - value) <= 0.5 * 10 ** -decimals + 1e-12, (c, value)
        checked += 1
    assert checked >= min_cells_per_system * len(systems), checked
    shot = page.with_name("screenshot.png")
    subprocess.run([browser, *flags, "--window-size=1500,2400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=300)
    assert shot.is_file() and shot.stat().st_size > 10000, "chromium wrote no screenshot"
    print(f"chromium: the page renders; {len(got['svgs'])} plots, {labels} text labels, none overlapping or cut off; "
          f"{checked} numbers equal the JSON report; screenshot {shot}")
    return got
