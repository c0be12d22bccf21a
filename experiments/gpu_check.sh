#!/usr/bin/env bash
# One short GPU check for a session that is lent the device machine (an H200 with JAX 0.11,
# flax, optax, chex and orbax, Python 3.12, no registry). Everything lands under $OUT.
#
# Prepare on the development machine, once, in the repo root (about 45 MB of wheels for
# what the device lacks: gymnax, distrax, tyro and, for the Brax figure, brax + mujoco):
#
#   bash experiments/gpu_check.sh --download
#
# then run it there through the device tool, carrying the wheels:
#
#   run(command="bash experiments/gpu_check.sh", carry=[".whl"], timeout_s=580)
#
# Each step has its own timeout and writes its log to $OUT, so a step that runs long
# still leaves the earlier results. The reference benchmark (../shared/bench) does not
# travel, so `ref` is not measured there. Not yet run on a device: no GPU was lent to the
# session that wrote it (2026-12-02).
set -u

WHEELS=(gymnax==1.0.1 gymnasium==1.3.0 farama-notifications==0.0.6 distrax==0.1.9
        tfp-nightly==0.26.0.dev20261027 decorator gast dm-tree==0.1.10 tyro==1.0.17
        docstring-parser typeguard==4.6.1 brax==0.14.2 mujoco==4.0.0 mujoco-core==4.0.0
        mujoco-studio==4.0.0 mujoco-mjx==3.17.0 glfw==2.11.0 pyopengl==3.1.10 websockets
        trimesh==5.2.0 ml-collections==1.1.0 flask==3.1.3 flask-cors jaxopt==0.8.5
        tensorboardx==2.6.5 blinker itsdangerous)

if [[ "${1:-}" == "--download" ]]; then
    grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
    platforms=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
             manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 any; do
        platforms+=(--platform "$p")
    done
    for wheel in "${WHEELS[@]}"; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp "${platforms[@]}" -d .whl "$wheel" || exit 1
    done
    du -sh .whl
    exit 0
fi

OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site:$PWD"

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log to $OUT/NAME.log
    local name=$1 seconds=$2
    shift 2
    echo "== $name ($(date +%H:%M:%S), limit ${seconds}s)"
    timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
    echo "   exit $? — tail:"
    tail -n 12 "$OUT/$name.log"
}

step install 120 python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ date; nvidia-smi; python3 -c "import jax; print(jax.__version__, jax.devices())"; } \
    > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

step cartpole 150 python3 experiments/throughput.py --only seeds vaco lag --num-envs 2048 \
    --total 2e7 --seeds 16 --repeats 2 --json "$OUT/throughput_cartpole.json"
step minatar 120 python3 experiments/throughput.py --env Breakout-MinAtar --only seeds vaco \
    --num-envs 2048 --total 1e7 --seeds 8 --repeats 2 --json "$OUT/throughput_minatar.json"
step brax 120 python3 experiments/throughput.py --only brax --brax-envs 2048 \
    --brax-total 4000000 --seeds 8 --repeats 2 --json "$OUT/throughput_brax.json"
step lag_sweep 150 python3 -m experiments.lag_sweep --envs CartPole-v1 --seeds 16 \
    --steps 300000 --out "$OUT/lag_sweep"
rm -rf "$OUT/lag_sweep/runs"  # checkpoints: too large to bring back, not needed
