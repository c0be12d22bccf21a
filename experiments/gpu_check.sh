#!/usr/bin/env bash
# One short GPU check for a session that is lent the device machine (an NVIDIA H200, x86-64,
# Python 3.12 with JAX 0.11 + CUDA, flax, optax, chex, orbax; no package registry).
#
# 1. Here, in the repo root, once: fetch the wheels the device lacks into .whl/ (gitignored;
#    about 27 MiB with brax + mujoco, 9 MiB with NO_BRAX=1) and copy the reference benchmark
#    ../shared/bench/ref_ppo_cartpole.py into .whl/ref/ (../shared does not travel):
#
#        bash experiments/gpu_check.sh --download
#
# 2. The device call (run tool), then give_back:
#
#        run(command="bash experiments/gpu_check.sh", carry=[".whl"], timeout_s=520)
#
# Steps, in order, each under `timeout` and all fitted inside DEADLINE (default 480 s of
# script time), so a slow step shortens the later ones instead of losing everything:
#   install     the carried wheels into /tmp/site (--no-index --no-deps); jaxvaco runs from
#               the checkout through PYTHONPATH (no build, no network)
#   env         nvidia-smi, python/jax versions and devices, every carried package's import
#   cartpole    throughput.py --only ref seeds vaco lag, CartPole-v1, 2048 envs, 2e7 steps
#   minatar     throughput.py --env Breakout-MinAtar --only seeds vaco, 2048 envs, 5e6 steps
#   brax        throughput.py --only brax (inverted_pendulum, spring), 2048 envs, 4M steps,
#               only if brax + mujoco import
#   fairstudy   (not in the default STEPS) the fair study's held-out Brax cells
#               (experiments/fair_study.py --held-out, 16 seeds x K in {0,2,4,8,16}), one
#               invocation per env of FS_ENVS with FS_VARIANTS (comma-separated, e.g.
#               "ppo_kl (learner critic),spo (learner critic)"), appended to a copy of the
#               committed study.csv; back come study.csv, summary.md and the finished cells'
#               metrics without checkpoints (fair_study_runs.tar.gz: `tar xzf ... -C
#               experiments/results/fair_study` here, and the same fair_study command run
#               here appends the finished cells' rows without rerunning them)
#   heldout2    (not in the default STEPS) the second held-out pool's remaining cells
#               (experiments/held_out_2.py --run, envs HO2_ENVS), appended to a copy of the
#               committed results.csv; back come held_out_2_results.csv (the committed rows
#               and the new ones: copy it over experiments/results/held_out_2/held_out_2/
#               results.csv here) and held_out_2_summary.md
#   scaling     (not in the default STEPS; issue 37 item 4) experiments/scaling.py on
#               CartPole-v1: envs SCALING_ENVS with 1 seed, seeds SCALING_SEEDS with
#               SCALING_SEED_ENVS envs each; back come scaling.csv and scaling.png
# Knobs (environment variables before the command): DEADLINE, STEPS (names above), NUM_ENVS,
# TOTAL, MINATAR_TOTAL, REPEATS, SEEDS, BRAX_ENV, BRAX_ENVS, BRAX_TOTAL, FS_ENVS,
# FS_VARIANTS, FS_ARGS, HO2_ENVS, HO2_ARGS, SCALING_ENVS, SCALING_SEEDS, SCALING_SEED_ENVS,
# SCALING_TARGET, PYTHON.
#
# What comes back under $OUT (the tool returns at most 8 files; pick STEPS so that at most 8
# are written):
#   log.txt  env.txt  throughput_cartpole.json  throughput_minatar.json
#   throughput_brax.json
#   study.csv  summary.md  fair_study_runs.tar.gz (fairstudy)
#   held_out_2_results.csv  held_out_2_summary.md (heldout2)  scaling.csv  scaling.png
# The last lines printed are a summary table (the tool's output_tail holds them).
#
# Ran on an H200 on 2026-12-04 as
#     run(command='STEPS="install env cartpole fairstudy" REPEATS=1 DEADLINE=575 bash
#                  experiments/gpu_check.sh', carry=[".whl"], timeout_s=600)
# in 518 s (install 2, env 14, cartpole 63, fairstudy 165 + 127 + 147 s); its log, env.txt
# and throughput JSON are in experiments/results/gpu_check/, the Brax rows in the fair
# study's study.csv. The minatar and brax steps have not run on a device yet.
#
# CPU dry run here, small sizes (a Python 3.12 venv with jax etc. stands for the device):
#   OUT=/tmp/gc PYTHON=/tmp/venv/bin/python NUM_ENVS=64 TOTAL=2e4 MINATAR_TOTAL=2e4 \
#   REPEATS=1 SEEDS=2 BRAX_ENVS=16 BRAX_TOTAL=4096 bash experiments/gpu_check.sh
set -u
set -o pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"

# --- what the device lacks (its package list: /work/.library/device/KINDS.md) ------------
# import jaxvaco: gymnax (+ gymnasium, farama-notifications), distrax (+ tfp-nightly and its
# decorator, gast, dm-tree); jaxvaco.cli: tyro (+ docstring-parser, typeguard, a recent
# typing-extensions). Versions: those of the development venv.
CORE=(gymnax==1.0.1 gymnasium==1.3.0 farama-notifications==0.0.6 distrax==0.1.9
      tfp-nightly==0.26.0.dev20261027 decorator==5.3.1 gast==0.7.0 dm-tree==0.1.10
      tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1 typing-extensions==4.16.0)
# What `brax.envs` imports when an env is built (read off sys.modules): brax, jaxopt,
# mujoco + mujoco-core, glfw, trimesh (mujoco-mjx for the 'mjx' backend). brax's other
# declared needs (flask, ml-collections, tensorboardx, mujoco-studio, pyopengl) stay behind.
BRAX=(brax==0.14.2 jaxopt==0.8.5 mujoco==4.0.0 mujoco-core==4.0.0 mujoco-mjx==3.17.0
      glfw==2.11.0 trimesh==5.2.0)

if [[ "${1:-}" == "--download" ]]; then
    set -e
    rm -rf .whl && mkdir -p .whl
    pkgs=("${CORE[@]}")
    [[ -n "${NO_BRAX:-}" ]] || pkgs+=("${BRAX[@]}")
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --abi cp312 --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
        -d .whl "${pkgs[@]}"
    if [[ -f ../shared/bench/ref_ppo_cartpole.py ]]; then
        mkdir -p .whl/ref && cp ../shared/bench/ref_ppo_cartpole.py .whl/ref/
    fi
    git check-ignore -q .whl/x || echo "WARNING: .whl/ is not ignored by git"
    ls -1 .whl
    du -sh .whl
    exit 0
fi

# --- the device run ---------------------------------------------------------------------
OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
LOG=$OUT/log.txt
PY=${PYTHON:-python3}
DEADLINE=${DEADLINE:-480}
STEPS=${STEPS:-install env cartpole minatar brax}
NUM_ENVS=${NUM_ENVS:-2048}
TOTAL=${TOTAL:-2e7}
MINATAR_TOTAL=${MINATAR_TOTAL:-5e6}
REPEATS=${REPEATS:-2}
SEEDS=${SEEDS:-16}
BRAX_ENV=${BRAX_ENV:-inverted_pendulum}
BRAX_ENVS=${BRAX_ENVS:-2048}
BRAX_TOTAL=${BRAX_TOTAL:-4194304}
FS_ENVS=${FS_ENVS:-hopper inverted_double_pendulum reacher}
FS_VARIANTS=${FS_VARIANTS:-ppo,vaco}  # comma-separated labels (some hold spaces)
FS_ARGS=${FS_ARGS:-}  # e.g. "--seeds 2 --steps 8192" for a dry run
FSDIR=/tmp/gpu_check_fair_study
HO2_ENVS=${HO2_ENVS:-walker2d ant halfcheetah}
HO2_ARGS=${HO2_ARGS:-}  # e.g. "--seeds 2 --steps 8192" for a dry run
HO2DIR=/tmp/gpu_check_held_out_2
SCALING_ENVS=${SCALING_ENVS:-256 2048 16384 65536}
SCALING_SEEDS=${SCALING_SEEDS:-1 4 16 64}
SCALING_SEED_ENVS=${SCALING_SEED_ENVS:-2048}
SCALING_TARGET=${SCALING_TARGET:-2e7}
SITE=/tmp/site

export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=1
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
# One persistent compilation cache for all steps: the same PPO program (1 seed, K = 0) is
# compiled by ref, seeds, vaco and lag; timings exclude compilation either way.
export JAX_COMPILATION_CACHE_DIR=/tmp/gpu_check_jax_cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1
SUMMARY=""

say() { echo "$*" | tee -a "$LOG"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }

step() {  # step NAME CAP COMMAND...: under `timeout`, capped by what is left of DEADLINE;
          # output to stdout and $LOG (and to $ALSO when set)
    local name=$1 cap=$2
    shift 2
    local left=$((DEADLINE - SECONDS - 5))
    local t=$((cap < left ? cap : left))
    if ((t < 15)); then
        say "=== [$name] skipped: ${left}s left of DEADLINE=${DEADLINE}s"
        SUMMARY+="  $name: skipped (deadline)"$'\n'
        return 124
    fi
    local t0=$SECONDS cmd="$*"
    ((${#cmd} > 240)) && cmd="${cmd:0:240} ..."
    say "=== [$name] $(date +%T) t=${SECONDS}s timeout=${t}s: $cmd"
    timeout -k 10 "$t" "$@" 2>&1 | tee -a "$LOG" ${ALSO:+"$ALSO"}
    local rc=${PIPESTATUS[0]}
    say "=== [$name] exit $rc after $((SECONDS - t0))s"
    SUMMARY+="  $name: exit $rc, $((SECONDS - t0))s$( ((rc == 124)) && echo ' (TIMED OUT)')"$'\n'
    return "$rc"
}

say "gpu_check $(date -u +%FT%TZ): OUT=$OUT DEADLINE=${DEADLINE}s STEPS='$STEPS'"

if want install; then
    if compgen -G ".whl/*.whl" >/dev/null; then
        step install 90 "$PY" -m pip install -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
    else
        say "=== [install] no .whl/*.whl: run 'bash experiments/gpu_check.sh --download' here"
        SUMMARY+="  install: no wheels carried"$'\n'
    fi
fi

if want env; then
    { echo "## nvidia-smi"; timeout 20 nvidia-smi || echo "(nvidia-smi failed)"
      echo "## host"; uname -a; nproc; } >"$OUT/env.txt" 2>&1
    ALSO=$OUT/env.txt step env 90 "$PY" -c '
import importlib, sys, time
print("python", sys.version.split()[0], sys.executable)
t0 = time.time()
import jax
print("jax", jax.__version__, jax.default_backend(), jax.devices(), f"init {time.time()-t0:.1f}s")
x = jax.numpy.ones((4096, 4096))
print("matmul", float((x @ x)[0, 0]), "on", x.devices())
for name in ["jaxlib", "flax", "optax", "chex", "orbax.checkpoint", "numpy", "scipy", "gymnax",
             "gymnasium", "distrax", "tensorflow_probability", "tyro", "brax", "mujoco",
             "jaxvaco", "jaxvaco.cli"]:
    try:
        m = importlib.import_module(name)
        version, path = getattr(m, "__version__", "-"), getattr(m, "__file__", "")
        print(f"  {name:<24} {version:<28} {path}")
    except Exception as e:
        print(f"  {name:<24} IMPORT FAILED: {type(e).__name__}: {e}")
'
fi

REF=.whl/ref/ref_ppo_cartpole.py
[[ -f $REF ]] || REF=../shared/bench/ref_ppo_cartpole.py
if want cartpole; then
    ONLY="seeds vaco lag"
    if [[ -f $REF ]]; then ONLY="ref $ONLY"; else say "no reference script: 'ref' dropped"; fi
    # shellcheck disable=SC2086
    step cartpole 180 "$PY" experiments/throughput.py --only $ONLY --num-envs "$NUM_ENVS" \
        --total "$TOTAL" --seeds "$SEEDS" --repeats "$REPEATS" --reference "$REF" \
        --json "$OUT/throughput_cartpole.json"
fi

if want minatar; then
    step minatar 100 "$PY" experiments/throughput.py --env Breakout-MinAtar --only seeds vaco \
        --num-envs "$NUM_ENVS" --total "$MINATAR_TOTAL" --seeds "$SEEDS" \
        --repeats "$REPEATS" --json "$OUT/throughput_minatar.json"
fi

if want brax; then
    if "$PY" -c "import brax, mujoco" >/dev/null 2>&1; then
        step brax 100 "$PY" experiments/throughput.py --only brax --brax-env "$BRAX_ENV" \
            --brax-envs "$BRAX_ENVS" --brax-total "$BRAX_TOTAL" --seeds "$SEEDS" \
            --repeats "$REPEATS" --json "$OUT/throughput_brax.json"
    else
        say "=== [brax] skipped: brax/mujoco do not import (wheels fetched with NO_BRAX=1?)"
        SUMMARY+="  brax: skipped (not installed)"$'\n'
    fi
fi

if want fairstudy; then
    IFS=, read -ra VARIANTS <<<"$FS_VARIANTS"
    rm -rf "$FSDIR" && mkdir -p "$FSDIR"
    cp experiments/results/fair_study/study.csv "$FSDIR/"
    for env in $FS_ENVS; do
        # shellcheck disable=SC2086
        step "fairstudy_$env" 600 "$PY" -m experiments.fair_study --held-out --envs "$env" \
            --variants "${VARIANTS[@]}" --out "$FSDIR" $FS_ARGS
        cp "$FSDIR/study.csv" "$OUT/" 2>/dev/null
        [[ -f $FSDIR/summary.md ]] && cp "$FSDIR/summary.md" "$OUT/"
        [[ -d $FSDIR/runs ]] && tar czf "$OUT/fair_study_runs.tar.gz" -C "$FSDIR" \
            --exclude=checkpoints runs
    done
fi

if want heldout2; then
    rm -rf "$HO2DIR" && mkdir -p "$HO2DIR"
    cp experiments/results/held_out_2/held_out_2/results.csv "$HO2DIR/results.csv"
    # shellcheck disable=SC2086
    step heldout2 600 "$PY" -m experiments.held_out_2 --run --envs $HO2_ENVS \
        --data "$HO2DIR/results.csv" --out "$HO2DIR" $HO2_ARGS
    cp "$HO2DIR/results.csv" "$OUT/held_out_2_results.csv"
    [[ -f $HO2DIR/summary.md ]] && cp "$HO2DIR/summary.md" "$OUT/held_out_2_summary.md"
fi

if want scaling; then
    # shellcheck disable=SC2086
    step scaling 300 "$PY" experiments/scaling.py --only CartPole-v1 --envs $SCALING_ENVS \
        --seeds $SCALING_SEEDS --seed-envs "$SCALING_SEED_ENVS" \
        --target-steps "$SCALING_TARGET" --out "$OUT"
fi

{
    echo
    echo "=== gpu_check done at t=${SECONDS}s"
    printf '%s' "$SUMMARY"
    for f in "$OUT"/throughput_*.json; do
        [[ -f $f ]] || continue
        "$PY" -c '
import json, sys
for r in json.load(open(sys.argv[1])):
    ratio, title, goal = r["ratio"], r["title"], r["goal"]
    print(f"{ratio:7.2f}  {title}  ({goal})")
    for k, v in r["sps"].items():
        print(f"           {k:<26} {v:>14,.0f} env-steps/s")' "$f"
    done
} 2>&1 | tee -a "$LOG"
exit 0
