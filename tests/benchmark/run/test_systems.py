"""Every systems/*.json carries an MLPerf system description that the official
system_desc_checker (ruleset 3.1.0) accepts, as `mlperf-maskrcnn config` resolves it (a multi-node
file extends its one-node file); the checker's verdict is read from its text, as it exits 0
either way. A description missing a field must be refused (so this test can fail).
systems/README.md's table of the files says of each what `config` resolves: its ranks and threads
per rank, device and precision, global batch and images per rank."""
import json
import pathlib
import re

import mrcnn_testenv as env


def verdict(desc, tmp):
    f = tmp / f"{desc.get('system_name', 'x')}.json"
    f.write_text(json.dumps(desc))
    p = env.run([env.PYTHON, "-m", "mlperf_logging.system_desc_checker", f, "training", "3.1.0",
                 "--log_output", tmp / "sdc.log"], cwd=tmp)
    return "System description checker passed" in p.stdout + p.stderr, p.stdout + p.stderr


def main():
    files = sorted((env.SOURCE_DIR / "systems").glob("*.json"))
    assert len(files) >= 13, files
    with env.scratch_dir("systems") as tmp:
        tmp = pathlib.Path(tmp)
        for f in files:
            p = env.run([env.mlperf_maskrcnn(), "config", "--system", f])
            assert p.returncode == 0, f"{f.name}: {p.stderr}"
            cfg = json.loads(p.stdout)
            desc = cfg["system"]
            ok, text = verdict(desc, tmp)
            assert ok, f"{f.name}: {text}"
            assert desc["division"] == cfg["submission"]["division"], f.name
            assert desc["system_name"] == f.stem, f"{f.name}: system_name must equal the file name"
            print(f"{f.name:28s} system description accepted ({desc['division']})")
        broken = dict(json.loads((env.SOURCE_DIR / "systems" / "cpu-dev.json").read_text())["system"])
        del broken["host_memory_capacity"]
        ok, text = verdict(broken, tmp)
        assert not ok, "a description without host_memory_capacity was accepted"
    readme_table(files)


def config_values(f, *keys):
    p = env.run([env.mlperf_maskrcnn(), "config", "--system", f, *[a for k in keys for a in ("--print", k)]])
    assert p.returncode == 0, f"{f.name}: {p.stderr}"
    return p.stdout.split()


def readme_table(files):
    """Each row of systems/README.md's table: `file.json` or `name-{2,4}n.json` (one file each), then
    system, division, "R × T" (ranks × threads; "A–B × T" over a row's files), "device, precision[, ...]",
    the global batch and the images per rank (one value, or one per file)."""
    text = (env.SOURCE_DIR / "systems" / "README.md").read_text()
    header = "| file | system | division | ranks × threads | device, precision | global batch | images per rank |"
    assert header in text, "systems/README.md: the table's header changed"
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    seen = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name, _, division, ranks_threads, device, batch, per_rank = cells
        m = re.fullmatch(r"`([\w.-]+?)(?:-\{([\d,]+)\}n)?\.json`", name)
        assert m, row
        names = [f"{m[1]}-{n}n.json" for n in m[2].split(",")] if m[2] else [f"{m[1]}.json"]
        batches = [int(b) for b in batch.split(", ")] * (len(names) if "," not in batch else 1)
        per_ranks = [int(b) for b in per_rank.split(", ")] * (len(names) if "," not in per_rank else 1)
        ranks, threads = ranks_threads.split(" × ")
        lo, _, hi = ranks.partition("–")
        assert len(batches) == len(per_ranks) == len(names), row
        got = []
        for n, b, r in zip(names, batches, per_ranks):
            world, t, gb, dev, prec, div = config_values(
                env.SOURCE_DIR / "systems" / n, "launch.world_size", "launch.threads_per_rank",
                "hyperparameters.global_batch_size", "run.device", "run.precision", "submission.division")
            assert (int(t), int(gb), int(gb) // int(world), div) == (int(threads), b, r, division), (n, row)
            assert device.startswith(f"{dev}, {prec}"), (n, dev, prec, row)
            got.append(int(world))
            seen.append(n)
        assert (got[0], got[-1]) == (int(lo), int(hi or lo)), (row, got)
    assert sorted(seen) == sorted(f.name for f in files), ("files without a row, or rows without a file", seen)
    print(f"systems/README.md: {len(rows)} rows, {len(seen)} files, as config resolves them")


if __name__ == "__main__":
    main()
