"""The command line every command shares, as a user coming from other harnesses types it:

  1. `mlperf-maskrcnn --version`: the version, commit and build type, then LibTorch's version
     (the one in .venv) and whether the project's CUDA kernels are built in;
  2. `--name=value` is `--name value` for every command (`config --set=run.seed=7 --print=run.seed`),
     and after a bare `--` (the train arguments launch reads: `launch -- --set=K=V` shapes the launch);
  3. the environment: MRCNN_SYSTEM is the default --system, MRCNN_DATA_DIR run.data_dir and
     MRCNN_OUT run.output_dir; --system and --set win over them;
  4. one error format: `mlperf-maskrcnn <command>: error: ...` on one line, exit 2, for check's bad
     options and missing logs and for an unknown command;
  6. every command's help gives its exit statuses and examples, and benchmark/COMMANDS.md holds
     the help texts as the executable prints them (run_scripts/command_reference.py --check);
  7. `check` takes the official checker's command line (--usage training --ruleset 3.1.0
     --log_output FILE) and ends with its word, SUCCESS or FAILED.
"""
import os
import re

import torch

import mrcnn_testenv as env

EXE = env.mlperf_maskrcnn()
SYSTEMS = env.SOURCE_DIR / "systems"


def run(*args, **environ):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MRCNN_")}
    e.update(environ)
    return env.run([EXE, *map(str, args)], env=e, cwd=env.SOURCE_DIR, timeout=60)  # systems/cpu-dev.json, the default


def config_print(*args, **environ):
    p = run("config", *args, **environ)
    assert p.returncode == 0, (args, environ, p.stderr)
    return p.stdout.splitlines()


def main():
    # 1. --version
    p = run("--version")
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.splitlines()[:2]
    assert re.match(r"mlperf-maskrcnn \d+\.\d+\.\d+ \(commit ([0-9a-f]{40}|unknown)", first), first
    assert second.startswith("LibTorch " + torch.__version__.split("+")[0] + ","), (second, torch.__version__)
    assert "CUDA kernels" in second, second
    print(f"--version: {first} / {second}")

    # 2. --name=value
    assert config_print("--set=run.seed=7", "--print=run.seed") == ["7"]
    assert config_print("--system=" + str(SYSTEMS / "aws-p3.16xlarge.json"), "--print", "system.system_name") == \
        ["aws-p3.16xlarge"]
    print("--name=value: as --name value")

    # 3. the environment, and the command line over it
    aws = str(SYSTEMS / "aws-p3.16xlarge.json")
    assert config_print("--print", "system.system_name", MRCNN_SYSTEM=aws) == ["aws-p3.16xlarge"]
    assert config_print("--system", SYSTEMS / "cpu-dev.json", "--print", "system.system_name",
                        MRCNN_SYSTEM=aws) == ["cpu-dev"]
    assert config_print("--print", "run.data_dir", "--print", "run.output_dir",
                        MRCNN_DATA_DIR="/data/coco2017", MRCNN_OUT="/scratch/runs") == ["/data/coco2017", "/scratch/runs"]
    assert config_print("--set", 'run.data_dir="/elsewhere"', "--print", "run.data_dir",
                        MRCNN_DATA_DIR="/data/coco2017") == ["/elsewhere"]
    print("environment: MRCNN_SYSTEM, MRCNN_DATA_DIR, MRCNN_OUT as defaults; --system and --set win")

    # 4. one error format
    for args, text in ((["check", "--ruleset=4.0.0", "x.log"], "--ruleset 4.0.0 is not implemented"),
                       (["check", "--bogus"], "unknown option '--bogus'"),
                       (["check"], "expected one or more MLPerf logs"),
                       (["no-such-command"], "unknown command 'no-such-command'"),
                       # A value out of range names its option and the value as given.
                       (["synth", "--out", "/nonexistent/x", "--objects", "5-2"],
                        "--objects 5-2: expected MIN-MAX with 1 <= MIN <= MAX <= 8"),
                       (["synth", "--out", "/nonexistent/x", "--size", "20x40"],
                        "--size 20x40: expected N or WxH with sides from 32 to 8192 pixels"),
                       (["synth", "--out", "/nonexistent/x", "--quality", "0"],
                        "--quality 0: expected a JPEG quality from 1 to 100")):
        p = run(*args)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "error: " + text in p.stderr, (args, p.returncode,
                                                                                               p.stderr)
        assert re.match(r"mlperf-maskrcnn( \S+)?: error: ", p.stderr), p.stderr
    # Every command on the one parser: an unknown option is the same one line, exit 2.
    top = run("--help").stdout
    commands = re.findall(r"^  (\S+) ", top, re.M)
    assert len(commands) >= 12, commands
    helps = {}
    for command in commands:
        words = ["data", "verify"] if command == "data" else [command]  # data's own subcommands first
        p = run(*words, "--bogus")
        assert p.returncode == 2 and p.stderr == f"mlperf-maskrcnn {' '.join(words)}: error: unknown option '--bogus' " \
                                                 "(see --help)\n", (command, p.returncode, p.stderr)
        p = run(command, "--help")
        assert p.returncode == 0 and "usage" in p.stdout.lower(), (command, p.returncode, p.stdout[:200])
        helps[command] = p.stdout
    print(f"errors: one line, `mlperf-maskrcnn <command>: error: ...`, exit 2; every one of {len(commands)} commands "
          "refuses an unknown option so and prints its usage for --help")

    # 5. --deterministic on a system whose fast path ignores it: the flag takes the fused bottlenecks
    # of the p5 files off (cuDNN's fused calls run without the deterministic setting), while the same
    # setting written as a key is refused, naming it. Both stop here at the dataset, not at the model.
    p5 = SYSTEMS / "aws-p5.48xlarge.json"
    assert config_print("--system", p5, "--print", "model.backbone.fused_conv_relu") == ["true"]
    missing = "/nonexistent/coco2017"
    p = run("train", "--system", p5, "--deterministic", "--set", f'run.data_dir="{missing}"', "--quiet")
    assert p.returncode != 0 and f"dataset folder {missing} does not exist" in p.stderr, p.stderr
    p = run("train", "--system", p5, "--set", "run.deterministic=true", "--set", f'run.data_dir="{missing}"', "--quiet")
    assert p.returncode != 0 and "model.backbone.fused_conv_relu" in p.stderr and "not with run.deterministic" in \
        p.stderr, p.stderr
    print("--deterministic: on aws-p5.48xlarge it turns the fused bottlenecks off; run.deterministic=true with "
          "them is refused, naming the key")


    # 6. exit statuses and examples in every help; the reference page equal to the help texts
    assert {"train", "launch", "data", "check", "report", "forecast", "audit", "eval", "predict", "coco-eval",
            "config"} <= set(commands), commands
    for command, text in helps.items():
        assert "exit status" in text.lower(), (command, text[-400:])
    for command in commands:
        assert re.search(r"^examples:\n  mlperf-maskrcnn " + re.escape(command), helps[command], re.M), \
            (command, helps[command][-400:])
    assert "coco-eval GT.json" in helps["coco-eval"] and "mlperf-maskrcnn coco-eval" in helps["coco-eval"]
    assert "exit status" in top and "examples:" in top
    p = env.run([env.PYTHON, env.SOURCE_DIR / "run_scripts" / "command_reference.py", "--build-dir", env.BUILD_DIR,
                 "--check"], timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    print(f"help: exit statuses and examples in all {len(commands)} commands; "
          "benchmark/COMMANDS.md equals the help texts")

    # 7. the official checker's command line, and its last word
    with env.scratch_dir("cli-check") as tmp:
        log = os.path.join(tmp, "empty.log")
        with open(log, "w") as f:
            f.write(":::MLLOG {}\n")
        report = os.path.join(tmp, "report.txt")
        p = run("check", "--usage", "training", "--ruleset", "3.1.0", "--log_output", report, log)
        assert p.returncode == 1 and p.stdout.splitlines()[-1] == "FAILED", (p.returncode, p.stdout)
        assert open(report).read() == p.stdout, (open(report).read(), p.stdout)
        p = run("check", "--usage=hpc", log)
        assert p.returncode == 2 and "--usage hpc is not implemented" in p.stderr, p.stderr
    print("check: --usage training --ruleset 3.1.0 --log_output FILE as the official checker takes them; "
          "the last line FAILED (SUCCESS when every log passes)")


if __name__ == "__main__":
    main()
