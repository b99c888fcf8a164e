#!/usr/bin/env bash
# The GPU path, checked on a machine with an NVIDIA GPU: builds for the local GPU, runs the CUDA
# tests, compares the detection ops and the R50-FPN training step (float16, batch 2/4/8,
# channels-last on and off) with torchvision's on the GPU, profiles one case (both sides' traces
# of consecutive steps, their tables, A/B timings: the profile stage), trains one epoch on
# synthetic COCO-sized JPEGs through the real loader (its images/s beside its steps') whose MLPerf
# log must pass the checker, and two deterministic epochs that must audit as bit-identical. Each stage has its own time
# limit (MRCNN_STAGE_TIMEOUT, default 600 s) and its own log under the output folder; a summary
# with every stage's verdict is printed at the end and written to OUT/summary.txt.
#
# Made for machines without internet that have PyTorch (with CUDA) and a CUDA toolkit but maybe
# not the project's other dependencies:
#   - PyTorch: the python3 on PATH (or MRCNN_PYTHON) provides LibTorch; no .venv is made.
#   - Debian packages: MRCNN_DEBS=DIR holding carried .deb files (nlohmann-json3-dev,
#     libspdlog-dev, libfmt-dev, libgtest-dev, libgmock-dev, libbenchmark-dev,
#     libturbojpeg0-dev, libjpeg62-turbo-dev, libpng-dev, ...) are unpacked into OUT/prefix
#     (dpkg-deb -x: no root needed) and found from there. Without them the machine's own are used.
#   - Missing Google Benchmark: the benchmarks are switched off (MRCNN_BUILD_BENCHMARKS=OFF).
#
# usage: run_scripts/gpu_check.sh [OUT]     (default OUT: gpu-check/ in the repository)
# Environment: MRCNN_PYTHON, MRCNN_DEBS, MRCNN_JOBS (default: cores), MRCNN_STAGE_TIMEOUT,
#              MRCNN_CUDA_ARCHITECTURES (default: the local GPU's, from nvidia-smi),
#              MRCNN_GPU_STAGES   which stages run, comma-separated (default: all of
#                                 configure,build,cuda_tests,all_tests,ops,steps,profile,nccl,epoch); build
#                                 implies configure; a run that leaves out build reuses OUT/build
#                                 as it is. "configure" alone needs no GPU: it checks, before a
#                                 GPU is at hand, that the carried packages and the PyTorch there
#                                 configure the project with its CUDA kernels. "profile"
#                                 (benchmark/perf/profile_step.py) writes OUT/profile/: ours and
#                                 torchvision's Kineto traces of 3 consecutive steps after 5 warm-up
#                                 (R50-FPN, float16, channels-last, batch 12), their tables
#                                 (trace_summary.py), A/B timings and the allocator's figures; its
#                                 PROFILE lines go into the summary. It needs bench_model_train_step,
#                                 as steps does; MRCNN_STAGE_TIMEOUT=420 suits it. "nccl" runs
#                                 allreduce_probe through the NCCL communicator on the GPU (one
#                                 rank, its host side the TCP ring): 176.5 MB of gradients in 25 MB
#                                 buckets, as the AWS systems reduce them; the epoch, too, trains
#                                 through NCCL where the program has it,
#              MRCNN_STEP_CASES   the train-step comparisons, as BATCH:CHANNELS_LAST pairs, with
#                                 ":g" for ours with CUDA graphs (backbone, FPN, RPN head)
#                                 (default: "2:1 2:0 4:1 4:0 8:1 8:0 8:1:g"),
#              MRCNN_EPOCH_IMAGES training images of the synthetic epoch (default 720: 60 steps),
#              MRCNN_EPOCH_SIZE   their size: "coco" (default: genuine COCO train2017 sizes, both
#                                 orientations, benchmark/perf/coco_train2017_sizes.json) or WxH,
#              MRCNN_EPOCH_BATCH  images a step of the p5 system's epoch (default 12, its own),
#              MRCNN_GPU_CHECK_BUILD  an existing build to use instead of OUT/build,
#              MRCNN_GPU_REHEARSAL=1  a rehearsal without a GPU, to find mistakes before device
#                                 time is spent: cuda_tests is left out; the op comparison runs
#                                 on the CPU (two cases, one repetition), so do the step
#                                 comparisons (the small network at 64 pixels, float16, 2
#                                 steps), the profile (the small network, float32: 1 warm-up
#                                 and 3 profiled steps, A/B at batch 2 with 2 steps; the traces
#                                 hold no GPU activity and say so) and the epoch (fp32, 160
#                                 pixels); use small
#                                 MRCNN_EPOCH_IMAGES and MRCNN_EPOCH_BATCH.
set -uo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mkdir -p "${1:-$repo/gpu-check}" && cd "${1:-$repo/gpu-check}" && pwd)"
python="${MRCNN_PYTHON:-python3}"
case $python in   # an absolute path, links kept (a virtual environment's python is one)
  /*) ;;
  */*) python="$PWD/$python" ;;
  *) python="$(command -v "$python")" || { echo "gpu_check: no $python on PATH" >&2; exit 1; } ;;
esac
jobs="${MRCNN_JOBS:-$(nproc)}"
limit="${MRCNN_STAGE_TIMEOUT:-600}"
build="${MRCNN_GPU_CHECK_BUILD:-$out/build}"
summary="$out/summary.txt"
: >"$summary"

all_stages="configure,build,cuda_tests,all_tests,ops,steps,profile,nccl,epoch"
stages=","
IFS=', ' read -r -a _asked <<<"${MRCNN_GPU_STAGES:-$all_stages}"
for _s in "${_asked[@]}"; do
  [[ -z $_s ]] && continue
  [[ ",$all_stages," == *",$_s,"* ]] ||
    { echo "gpu_check: unknown stage '$_s' in MRCNN_GPU_STAGES (stages: $all_stages)" >&2; exit 2; }
  stages+="$_s,"
done
[[ $stages == *",build,"* ]] && stages+="configure,"
wants() { [[ $stages == *",$1,"* ]]; }
configure_only=0
[[ $stages =~ ^,(configure,)+$ ]] && configure_only=1
for _c in ${MRCNN_STEP_CASES:-}; do
  [[ $_c =~ ^[0-9]+:[01](:g)?$ ]] ||
    { echo "gpu_check: MRCNN_STEP_CASES entries are BATCH:CHANNELS_LAST[:g] (e.g. 8:1 or 8:1:g), got '$_c'" >&2; exit 2; }
done
rehearsal=0
if [[ ${MRCNN_GPU_REHEARSAL:-0} == 1 ]]; then
  rehearsal=1
  stages="${stages//,cuda_tests,/,}"
fi
needs_gpu=$((!configure_only && !rehearsal))
export PYTHONUNBUFFERED=1
# Line-buffered output, so that a stage cut off by its time limit leaves what it printed.
linebuf=()
command -v stdbuf >/dev/null && linebuf=(stdbuf -oL -eL)

ran=0
watch=""
# The watchdog of the stage in progress, and its sleep, end with the stage or the script.
stop_watch() {
  [[ -n $watch ]] || return 0
  pkill -P "$watch" 2>/dev/null; kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null
  watch=""
}
trap stop_watch EXIT
trap 'stop_watch; exit 130' INT
trap 'stop_watch; exit 143' TERM

say() { printf '[gpu_check] %s\n' "$*" | tee -a "$summary" >&2; }

# stage NAME CMD...: runs CMD with the time limit, its output in OUT/NAME.log; records the verdict.
# Configuring takes seconds, so it gets at most 180 s. Shortly before a stage's limit, the
# processes still running go into its log: a stage that hangs says what it waits on.
stage() {
  local name=$1; shift
  local start=$SECONDS rc stage_limit=$limit
  [[ $name == configure ]] && ((stage_limit > 180)) && stage_limit=180
  local log="$out/$name.log"
  printf '[gpu_check] %s ...\n' "$name" >&2
  : >"$log"
  # The watchdog holds none of the script's output open, so nothing waits on it.
  ( exec >/dev/null 2>&1
    sleep $((stage_limit > 20 ? stage_limit - 5 : stage_limit * 3 / 4)) &&
    { echo "[gpu_check] $name still running after $((SECONDS - start)) s; processes:"
      ps -eo pid,ppid,etime,args --forest | awk '$1 != 2 && $2 != 2' | cut -c1-240
    } >>"$log" 2>&1 ) &
  watch=$!
  timeout --signal=TERM --kill-after=30 "$stage_limit" "${linebuf[@]}" "$@" >>"$log" 2>&1
  rc=$?
  stop_watch
  ran=$((ran + 1))
  local verdict="passed"
  [[ $rc -eq 124 || $rc -eq 137 ]] && verdict="TIMED OUT after ${stage_limit} s"
  [[ $rc -ne 0 && $verdict == passed ]] && verdict="FAILED (exit $rc)"
  say "$(printf '%-14s %-24s %4d s   log: %s' "$name" "$verdict" $((SECONDS - start)) "$out/$name.log")"
  [[ $rc -ne 0 ]] && tail -n 25 "$log" >&2
  return $rc
}

# ---- 0. what is here ---------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  if ((needs_gpu)); then
    say "no NVIDIA GPU here (nvidia-smi finds none): nothing to check"
    exit 77
  fi
  ((rehearsal)) && say "no NVIDIA GPU here: a rehearsal on the CPU (cuda_tests left out)"
  ((configure_only)) && say "no NVIDIA GPU here: configuring only"
fi
{
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader
  head -n 1 /etc/os-release 2>/dev/null
  echo "cores $(nproc); $(cmake --version | head -n 1)"
  "$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
"arch", torch._C._cuda_getArchFlags(), "device available", torch.cuda.is_available())'
  command -v nvcc >/dev/null && nvcc --version | tail -n 2
} 2>&1 | tee "$out/machine.txt" | sed 's/^/[gpu_check]   /' >&2
if ((needs_gpu)); then
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    { say "PyTorch at $python sees no CUDA device"; exit 1; }
fi

# A stand-in for the project's .venv: CMake asks <venv>/bin/python for LibTorch.
mkdir -p "$out/pyenv/bin"
# A wrapper, not a link: a link to a virtual environment's python leaves that environment behind.
# (An earlier version's link is removed first: writing through it would replace that python.)
rm -f "$out/pyenv/bin/python"
printf '#!/bin/sh\nexec %q "$@"\n' "$python" >"$out/pyenv/bin/python"
chmod +x "$out/pyenv/bin/python"

# ---- 1. dependencies ---------------------------------------------------------------------------
prefix_args=()
if [[ -n "${MRCNN_DEBS:-}" ]]; then
  prefix="$out/prefix"
  mkdir -p "$prefix"
  for deb in "$MRCNN_DEBS"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  # Absolute links (libz.so -> /lib/.../libz.so.1.2.13) would point out of the prefix.
  while IFS= read -r link; do
    target="$(readlink "$link")"
    [[ $target == /* && -e "$prefix$target" ]] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l)
  say "unpacked $(ls "$MRCNN_DEBS"/*.deb | wc -l) carried .deb files into $prefix"
  # pkg-config reads the carried .pc files only, and puts the prefix before the paths they name.
  export PKG_CONFIG_LIBDIR="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$prefix"
  command -v pkg-config >/dev/null || export PATH="$prefix/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  prefix_args=("-DCMAKE_PREFIX_PATH=$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake"
               "-DCMAKE_CXX_FLAGS=-isystem $prefix/usr/include")
fi
optional=()
if ! compgen -G "/usr/lib/x86_64-linux-gnu/cmake/benchmark/*" >/dev/null &&
   ! compgen -G "${prefix:-/nonexistent}/usr/lib/x86_64-linux-gnu/cmake/benchmark/*" >/dev/null; then
  optional+=(-DMRCNN_BUILD_BENCHMARKS=OFF)
  say "Google Benchmark not found: benchmarks switched off"
fi
generator=(-G Ninja)
command -v ninja >/dev/null || generator=()

# ---- 2. build ----------------------------------------------------------------------------------
# One GPU needs no MPI (nor the NCCL communicator, which is built with it): MPI is left out.
arch_args=()
[[ -n "${MRCNN_CUDA_ARCHITECTURES:-}" ]] && arch_args=("-DMRCNN_CUDA_ARCHITECTURES=$MRCNN_CUDA_ARCHITECTURES")
if wants configure; then
  stage configure cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMRCNN_VENV="$out/pyenv" "${arch_args[@]}" "${prefix_args[@]}" "${optional[@]}" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON || exit 1
  grep -q "project CUDA kernels: ON" "$out/configure.log" ||
    { say "the build would not compile the CUDA kernels (see configure.log)"; exit 1; }
fi
((configure_only)) && { say "configured: $build"; exit 0; }
# The build compiles what the chosen stages run: everything for all_tests; else the program, the
# ops library, the train-step driver and the test executables that hold a CUDA test. GoogleTest's
# names are known to ctest only after a build, so they are read from the sources: a TEST in
# tests/<dir>/*.cpp whose Suite.Name matches the CUDA pattern puts test_<dir, '/' as '_'> on the
# list. Where a name is no target of this build, everything is built. A device's minutes go to
# running, not to compiling the suites that it does not run.
build_targets() {
  wants all_tests && return 0
  local targets="mlperf-maskrcnn mrcnn_ops" known
  { wants steps || wants profile; } && targets+=" bench_model_train_step"
  wants nccl && targets+=" allreduce_probe"
  wants epoch && targets+=" bench_data_pipeline"
  wants cuda_tests && targets+=" $("$python" - "$repo/tests" "$cuda_tests" <<'PY'
import os, re, sys
root, pattern = sys.argv[1], re.compile(sys.argv[2])
test = re.compile(r"^\s*(?:TEST|TEST_F|TEST_P)\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
names = set()
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".cpp") and any(pattern.search(f"{a}.{b}")
                                      for a, b in test.findall(open(os.path.join(d, f)).read())):
            names.add("test_" + os.path.relpath(d, root).replace(os.sep, "_"))
print(" ".join(sorted(names)))
PY
)"
  known="$(cmake --build "$build" --target help 2>/dev/null)"
  for t in $targets; do
    grep -qE "(^|[[:space:]])$t(:|[[:space:]]|$)" <<<"$known" ||
      { say "'$t' is no target of this build: building everything"; return 0; }
  done
  echo "$targets"
}
cuda_tests="OpsCuda|PortableOnGpu|DeviceFaults|SyncCounter|Cuda|cuda"
if wants build; then
  targets="$(build_targets)"
  target_args=()
  [[ -n $targets ]] && { say "building: $targets"; target_args=(--target $targets); }
  stage build cmake --build "$build" -j "$jobs" "${target_args[@]}" || exit 1
elif [[ ! -x "$build/benchmark/mlperf-maskrcnn" ]]; then
  say "no build in $build: run with the build stage first"; exit 1
fi

# ---- 3. CUDA tests and the rest of the suite ---------------------------------------------------
failed=0
if wants cuda_tests; then
  # Verbose: the tests print what they measured (differences, spreads) for the record.
  stage cuda_tests ctest --test-dir "$build" --verbose -R "$cuda_tests" || failed=1
  grep -q "Skipped\|SKIPPED" "$out/cuda_tests.log" && say "  (some CUDA tests skipped: see cuda_tests.log)"
fi
if wants all_tests; then
  # The C++ suites. The Python reference checks (label "python") need the project's .venv
  # (pycocotools, mlperf-logging, ...), which a GPU machine's PyTorch install may not have: CI runs
  # them.
  stage all_tests ctest --test-dir "$build" --output-on-failure -j "$jobs" -E "$cuda_tests" -LE python ||
    failed=1
fi

# ---- 4. the detection ops against torchvision on the GPU ---------------------------------------
if wants ops; then
  ops_run=(--device cuda --reps 7)
  ((rehearsal)) &&
    ops_run=(--device cpu --reps 1 --threads "$jobs" --cases multilevel_roi_align_mask proposals_test)
  stage ops_vs_tv "$python" "$repo/benchmark/perf/compare_ops_torchvision.py" --build-dir "$build" \
    "${ops_run[@]}" || failed=1
  grep '^RESULT' "$out/ops_vs_tv.log" | sed 's/^/[gpu_check]   /' | tee -a "$summary" >&2
fi

# ---- 5. the training step against torchvision's on the GPU -------------------------------------
# ResNet-50-FPN at 800x1333, float16 autocast, per case a batch size and channels-last on or off:
# images/s, host syncs per step and peak GPU memory of both sides (RESULT lines in the summary).
if wants steps; then
  if [[ -x "$build/benchmark/perf/bench_model_train_step" ]]; then
    run=(--config full --device cuda --reps 2 --steps 10 --warmup 3 --threads 8)
    # The rehearsal also takes 64-pixel images (not 128): the same command and code path, a quarter
    # of the pixels for a CPU, where float16 convolutions run far slower than float32 (a rehearsal
    # of the step took 202 s alone and 414 s of CI at 128, against the stage's 600 s). And one
    # timed step, no warm-up: each float16 step is ~6.5 s on 2 cores, the same after the first, and
    # without a warm-up the comparison traces its profiled step in the timed run's process (a
    # rehearsal of 8 steps a side, 120 s, became one of 3 a side).
    ((rehearsal)) && run=(--config small --size 64x64 --device cpu --reps 1 --steps 1 --warmup 0 --threads "$jobs")
    for case in ${MRCNN_STEP_CASES:-2:1 2:0 4:1 4:0 8:1 8:0 8:1:g}; do
      IFS=: read -r batch cl graphs <<<"$case"
      name="step_b${batch}_cl${cl}" extra=()
      # CUDA graphs are a GPU switch: a rehearsal on the CPU runs the case without them.
      # One shape: the harness allows no more (a second shape's graphs computed another step on an H200).
      if [[ $graphs == g ]]; then name+="_graphs"; ((rehearsal)) || extra=(--cuda-graphs 1); fi
      stage "$name" "$python" "$repo/benchmark/perf/compare_model_train_step.py" \
        --build "$build" "${run[@]}" --precision fp16 --batch "$batch" --channels-last "$cl" "${extra[@]}" \
        --json "$out/$name.json" || failed=1
      grep '^RESULT' "$out/$name.log" | sed 's/^/[gpu_check]   /' | tee -a "$summary" >&2
    done
  else
    say "bench_model_train_step is not in $build (Google Benchmark missing, or built by a run whose stages left out steps): no train-step comparison"
  fi
fi

# ---- 6. one case profiled ---------------------------------------------------------------------
# ResNet-50-FPN at 800x1333, float16 autocast, channels-last, batch 12 (the p5 system's images per
# GPU; ours traced in that system's model options): each side's trace of 3 consecutive steps after
# 5 warm-up steps, the tables of both, A/B timings (one process per variant; the systems rows at
# batch 8 and 12) and the allocator's figures, in OUT/profile/ (at most 8 files of <= 16 MiB: what
# a visit brings back; benchmark/perf/gpu_profiles/README.md says where they go).
if wants profile; then
  if [[ -x "$build/benchmark/perf/bench_model_train_step" ]]; then
    run=(--config full --device cuda --precision fp16 --batch 12 --warmup 5 --steps 3 --ab-batches 2,8,12
         --ab-steps 10 --threads 8)
    ((rehearsal)) && run=(--config small --device cpu --precision fp32 --batch 8 --warmup 1 --steps 3
                          --ab-batches 2 --ab-steps 2 --threads "$jobs")
    # A previous run's files would pass for this one's where a part of it fails.
    rm -rf "$out/profile"
    stage profile "$python" "$repo/benchmark/perf/profile_step.py" --build "$build" --out "$out/profile" \
      --channels-last 1 "${run[@]}" || failed=1
    [[ -f "$out/profile/summary.txt" ]] &&
      grep '^PROFILE' "$out/profile/summary.txt" | sed 's/^/[gpu_check]   /' | tee -a "$summary" >&2
  else
    say "bench_model_train_step is not in $build (Google Benchmark missing, or built by a run whose stages left out steps and profile): no profile"
  fi
fi

# ---- 7. NCCL ---------------------------------------------------------------------------------
# The AWS systems reduce their gradients through the NCCL communicator (benchmark/comm). One GPU
# makes one rank: NCCL's set-up, its stream and events, the watchdog and the bucketed all-reduce
# all run as on a node, only without peers. The rank's environment is torchrun's (the TCP ring is
# the host side: no MPI in this build).
exe="$build/benchmark/mlperf-maskrcnn"
nccl_env=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
          MASTER_PORT="${MRCNN_NCCL_PORT:-29541}")
has_nccl=0
((rehearsal)) || { ldd "$exe" 2>/dev/null | grep -q libnccl && has_nccl=1; }
if wants nccl; then
  if [[ ! -x "$build/benchmark/perf/allreduce_probe" ]]; then
    say "nccl: allreduce_probe is not in $build (a build whose stages left out nccl)"
    failed=1
  elif ((rehearsal)); then
    say "nccl: a rehearsal has no GPU: the probe runs through the TCP ring on the CPU instead"
    stage nccl_probe "${nccl_env[@]}" "$build/benchmark/perf/allreduce_probe" --communicator tcp \
      --device cpu --megabytes 8 --iterations 2 || failed=1
  elif ((has_nccl)); then
    stage nccl_probe "${nccl_env[@]}" "$build/benchmark/perf/allreduce_probe" --communicator nccl \
      --device cuda --megabytes 176.5 --bucket-megabytes 25 --iterations 10 --warmup 2 || failed=1
  else
    say "nccl: the program is built without the NCCL communicator (no nccl.h or libnccl at configure time)"
    failed=1
  fi
  [[ -f "$out/nccl_probe.log" ]] && grep -E 'median_s|error' "$out/nccl_probe.log" | tail -n 2 |
    sed 's/^/[gpu_check]   NCCL_PROBE /' | tee -a "$summary" >&2
fi

# ---- 8. one epoch of the p5 system's own configuration, on synthetic JPEGs of COCO's sizes --------
# As the p5 system trains: its file itself (closed-division arithmetic, the mask head's bucket, the
# fused bottlenecks, batches padded to its two shapes and warmed up before run_start), on one GPU
# at its 12 images per GPU, through NCCL where the program has it, the real loader decoding JPEGs
# whose sizes are genuine COCO train2017 sizes in both orientations
# (benchmark/perf/coco_train2017_sizes.json) on all the machine's cores. The epoch's images/s and
# its steps' own compute times, set beside the profile's bench row of the same configuration
# (systems_mlperf_batch12), say whether the trained step is the measured one: the warm-up shows in
# init, and no timed step is planned on the clock. Then two deterministic epochs must audit as
# bit-identical.
if wants epoch; then
  images="${MRCNN_EPOCH_IMAGES:-720}"
  size="${MRCNN_EPOCH_SIZE:-coco}"
  batch="${MRCNN_EPOCH_BATCH:-12}"
  val=$((images / 4 < 8 ? 8 : images / 4 > 64 ? 64 : images / 4))
  data="$out/synthetic-$size-$images"
  sizes=(--size "$size")
  [[ $size == coco ]] && sizes=(--sizes-from "$repo/benchmark/perf/coco_train2017_sizes.json")
  if [[ ! -f "$data/annotations/instances_val2017.json" ]]; then
    stage synth "$exe" synth --out "$data" --train "$images" --val "$val" "${sizes[@]}" --quiet || failed=1
  fi
  # The loader alone over the same images (bench_data_pipeline's BM_LoaderEpoch: read, decode,
  # resize to 800, flip, normalize, batch; no model) on the largest thread count it has that the
  # machine has cores for: the rate the epoch's step would have to beat for the loader to pace it.
  loader_bench="$build/benchmark/perf/bench_data_pipeline"
  if [[ -x "$loader_bench" ]]; then
    loader_threads=1
    for t in 16 8 4 2; do ((t <= jobs)) && { loader_threads=$t; break; }; done
    stage loader env MRCNN_DATA_BENCH_DIR="$data" "$loader_bench" "--benchmark_filter=^BM_LoaderEpoch/$loader_threads/" \
      --benchmark_min_time=0.01 --benchmark_format=json || failed=1
    "$python" - "$out/loader.log" "$loader_threads" <<'PY' | tee -a "$summary" >&2
import json, sys
text = open(sys.argv[1]).read()
try:
    b = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]["benchmarks"][0]
    print(f"LOADER threads={sys.argv[2]} images_per_second={b['items_per_second']:.1f} "
          f"consumer_wait_s={b.get('consumer_wait_s', 0):.3f} (the loader alone, batch 2, no model)")
except (ValueError, KeyError, IndexError) as e:
    print(f"LOADER no result in {sys.argv[1]}: {e}")
PY
  else
    say "bench_data_pipeline is not in $build (Google Benchmark missing): no loader figure"
  fi
  # The p5 file on one GPU, its batch of 12 a global batch of one rank. No ImageNet weights reach a
  # machine without internet, so the network starts from its initializer: the reference's frozen
  # batch norm with identity statistics starts at a mask loss near 2,500 and diverges in a few
  # float16 steps at a training learning rate (seen on an H200), so the rate is 1e-6: an epoch
  # of steps that measures speed, not learning (open division; train's exit 3, targets not
  # reached, is the expected end). Its heads have the synthetic set's 4 classes and background.
  hyper="{\"$batch\": {\"base_lr\": 1e-6, \"warmup_steps\": 1, \"warmup_factor\": 1.0, \"decay_steps\": [100000, 200000], \"num_image_candidates\": $((1000 * batch))}}"
  on_cpu=()
  # The rehearsal also resizes to 160 pixels (not 800), pads to shapes of that size, and samples 64
  # RoIs an image (the mask head's warm-up then meets one bucket, not 24): the same command and
  # code path, far fewer FLOPs for a CPU. The fused bottlenecks are cuDNN's: off there.
  ((rehearsal)) && on_cpu=(--set 'run.device="cpu"' --set 'run.precision="fp32"'
                           --set "launch.threads_per_rank=$jobs" --set 'model.backbone.fused_conv_relu=false'
                           --set 'data.min_size=160' --set 'data.max_size=200'
                           --set 'data.pad_to_shapes=[[160, 224], [224, 160]]'
                           --set 'model.box_head.batch_size_per_image=64')
  # epoch_run STAGE OUTDIR [TRAIN_ARGS...]: the epoch's training run as a stage.
  comm=(--set 'launch.communicator="local"') epoch_env=(env)
  ((has_nccl)) && comm=(--set 'launch.communicator="nccl"') epoch_env=("${nccl_env[@]}")
  say "epoch: systems/aws-p5.48xlarge.json at batch $batch, communicator ${comm[1]#launch.communicator=}"
  epoch_run() {
    local name=$1 runs=$2; shift 2
    rm -rf "$runs"
    stage "$name" "${epoch_env[@]}" bash -c '"$@"; rc=$?
      [[ $rc -eq 3 ]] && { echo "[gpu_check] targets not reached in one epoch (exit 3), as expected"; exit 0; }
      exit $rc' train "$exe" train --system "$repo/systems/aws-p5.48xlarge.json" \
      --set 'launch.nodes=1' --set 'launch.ranks_per_node=1' "${comm[@]}" \
      --set "run.data_dir=\"$data\"" --set "data.loader_threads=$jobs" \
      --set 'submission.division="open"' --set 'system.division="open"' \
      --set "hyperparameters.by_global_batch_size=$hyper" --set "hyperparameters.global_batch_size=$batch" \
      --set 'run.max_epochs=1' --set 'run.initial_weights=""' --set 'run.cache_clear=false' \
      --set 'model.num_classes=5' "${on_cpu[@]}" --out "$runs" --no-progress "$@"
  }
  epoch_run train_epoch "$out/runs" || failed=1
  log="$out/runs/latest/mlperf_log.txt"
  if [[ -f "$log" ]]; then
    stage log_check "$exe" check "$log" || failed=1
    # The epoch's images/s, loader included (the trainer's cumulative rate at its last step); the
    # steps' own compute (median and slowest: a step planned on the clock stands out); the
    # warm-up's time in init; the profile's bench row of the same configuration beside them.
    "$python" - "$out/runs/latest" "$out/profile/ab.json" "$batch" <<'PY' | tee -a "$summary" >&2
import json, pathlib, statistics, sys
run, ab_file, batch = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
steps = [e for e in map(json.loads, open(run / "metrics.jsonl")) if e.get("event") == "step" and e.get("epoch") == 1]
records = [json.loads(l.split(":::MLLOG ", 1)[1]) for l in open(run / "mlperf_log.txt") if ":::MLLOG " in l]
warm = [r for r in records if r["key"] == "init_warm_up"]
ranks = [r for r in records if r["key"] == "rank_step_seconds"]
if not steps:
    print("EPOCH no step of epoch 1 in the metrics")
else:
    compute = [e["compute_s"] for e in steps if "compute_s" in e]
    line = f"EPOCH steps={steps[-1]['step'] + 1} batch={batch} images_per_second_epoch={steps[-1]['images_per_s']:.1f}"
    if compute:
        med = statistics.median(compute)
        line += f" compute_median_ms={med * 1e3:.1f} compute_slowest_ms={max(compute) * 1e3:.1f} slowest_over_median={max(compute) / med:.2f}"
    if ranks:
        line += f" rank_step_seconds={json.dumps(ranks[-1]['value'], separators=(',', ':'))}"
    line += f" warm_up_s={warm[0]['value']:.1f}" if warm else " warm_up=none"
    try:
        row = next(v for v in json.loads(ab_file.read_text())["variants"] if v["name"] == f"systems_mlperf_batch{batch}")
        line += (f" bench_{row['name']}_ips={row['images_per_second']:.1f}"
                 f" epoch_over_bench={steps[-1]['images_per_s'] / row['images_per_second']:.3f}")
    except (OSError, ValueError, StopIteration, KeyError):
        line += " bench_row=none (no profile stage in this run)"
    print(line + " (the whole epoch, loader included)")
PY
  else
    say "no MLPerf log from the epoch run"
    failed=1
  fi
  # Two deterministic epochs: the same losses, step for step, and the same accuracy.
  if epoch_run deterministic_a "$out/runs-det-a" --deterministic --seed 7 &&
     epoch_run deterministic_b "$out/runs-det-b" --deterministic --seed 7; then
    stage determinism "$exe" audit "$out/runs-det-a/latest" "$out/runs-det-b/latest" || failed=1
    grep -E "bit-identical|diverges|differ in setup" "$out/determinism.log" | head -n 1 |
      sed 's/^/[gpu_check]   /' | tee -a "$summary" >&2
  else
    failed=1
  fi
fi

((ran > 0)) || { say "no stage ran (MRCNN_GPU_STAGES=${MRCNN_GPU_STAGES:-})"; exit 2; }
say "done: $([[ $failed -eq 0 ]] && echo 'every stage passed' || echo 'some stages FAILED'); summary in $summary"
exit $failed
