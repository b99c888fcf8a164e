"""Every systems/*.json carries an MLPerf system description that the official
system_desc_checker (ruleset 3.1.0) accepts, as `mlperf-maskrcnn config` resolves it (a multi-node
file extends its one-node file); the checker's verdict is read from its text, as it exits 0
either way. A description missing a field must be refused (so this test can fail)."""
import json
import pathlib

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


if __name__ == "__main__":
    main()
