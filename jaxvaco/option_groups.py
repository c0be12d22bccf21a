"""The groups of options of a `jaxvaco.config.TrainConfig`: the lag, each algorithm's
own options, evaluation and distribution (`--lag.*`, `--vaco.*`, ... on the command line).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Critic = Literal["behaviour", "learner"]
Estimator = Literal["gae", "vtrace"]
AdvantageForm = Literal["weighted", "normalize_then_weight"]
Anchor = Literal["behaviour", "learner"]


@dataclasses.dataclass(frozen=True)
class LagConfig:
    """Simulated policy lag [ours].

    The N envs are split into `num_groups` actor groups; in iteration T group g acts with
    the learner's parameters from k_g(T) iterations ago, clamped at θ_0.
    """

    max_delay: int = 0
    """K, the lag in learner iterations, of a run (0 = synchronous on-policy training), and
    the ring buffer's capacity: the largest K (`lag_delay` in grids) a run's grid may ask
    for."""
    mode: Literal["fixed", "uniform", "spread", "replay"] = "fixed"
    """fixed: k_g = K; uniform: k_g(T) ~ U{0..K} per group and iteration;
    spread: group g always lags round(g·K/(G−1)); replay: k(T) is the lag the learner of
    the asynchronous run in --lag.replay saw in its iteration T (G = 1)."""
    num_groups: int = 1
    """G: actor groups; must divide --num-envs."""
    replay: str = ""
    """With --lag.mode replay: the run folder of an asynchronous run, whose
    lag_schedule.csv gives the delays (--lag.max-delay is raised to its largest lag)."""


@dataclasses.dataclass(frozen=True)
class AsyncConfig:
    """Asynchronous actors and learner [ours] (`jaxvaco.asynchronous`): actor threads
    collect with the newest parameters they have received and push trajectories into a
    bounded queue; the learner pops one per iteration. Not bit-reproducible; replay its
    lag_schedule.csv with --lag.mode replay for a deterministic run."""

    enabled: bool = False
    """Train with asynchronous actors and learner instead of the one compiled loop."""
    actor_devices: int = 1
    """A: actor threads, actor i on device i mod D; each collects --num-envs envs."""
    learner_devices: int = 1
    """L: the learner's devices (the last L): each trajectory's envs split over them, every
    minibatch spread over all L and the gradients averaged (the synchronous path's global
    shuffle)."""
    queue_size: int = 2
    """Trajectories the queue holds before actors wait."""
    max_lag: int = 0
    """A trajectory older than this many learner iterations is handled by --asynchronous.stale
    (0 = no limit)."""
    stale: Literal["drop", "use"] = "drop"
    """drop: discard a trajectory beyond --asynchronous.max-lag (counted in async/dropped);
    use: learn from it anyway (its lag stays in lag/* and lag_schedule.csv)."""
    timeout_s: float = 300.0
    """The run stops with an error when the learner waits this long for a trajectory."""


@dataclasses.dataclass(frozen=True)
class EstimateConfig:
    """The per-iteration estimate of an algorithm: which critic and which estimator
    give the advantages Â and value targets, frozen for the iteration's E × M updates.

    The importance correction from β to the learner enters once (`jaxvaco.algos.common`):
    with anchor β the objective's ratio π_θ/β carries it, so Â holds no ρ; with anchor π_T,
    ρ_t = min(ρ̄, π_T/β) multiplies Â once (inside V-trace, or after normalisation).
    """

    critic: Critic = "learner"
    """learner: V_T(s), V_T(s') recomputed with the learner's critic once per iteration;
    behaviour: the values V_β(s) recorded at collection time, which collapse under lag
    [ours] (for ablations)."""
    advantages: Estimator = "gae"
    """gae: GAE(γ, λ); vtrace: V-trace(γ, λ, ρ̄, c̄) with ratios π_T/β (value targets with
    truncated traces; Â_t = q_t − V(s_t), times ρ_t only with anchor π_T)."""
    rho_bar: float = 1.0
    """ρ̄: truncation of V-trace's ρ and of the anchor-π_T importance weight."""
    c_bar: float = 1.0
    """c̄: truncation of V-trace's trace coefficient c."""
    advantage_form: AdvantageForm = "weighted"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t, then per-minibatch
    normalisation; normalize_then_weight = normalise the unweighted Â, then multiply by ρ_t.
    With anchor π_T and GAE the weight always comes after normalisation."""


@dataclasses.dataclass(frozen=True)
class PPOConfig(EstimateConfig):
    """Options of `ppo`: the clipped surrogate on the chosen anchor."""

    anchor: Anchor = "behaviour"
    """behaviour: r = π_θ/β (logged log-probs); learner: r = π_θ/π_T, the sample weighted once
    by min(rho_bar, π_T/β) (decoupled PPO, Hilton et al. 2021)."""


@dataclasses.dataclass(frozen=True)
class PPOKLConfig(EstimateConfig):
    """Options of `ppo_kl`: −E[r Â] + c_kl·KL(β‖π_θ) (Schulman et al. 2017)."""

    kl_coef: float = 1.0
    """Initial (or fixed) KL penalty coefficient c_kl."""
    target_kl: float = 0.0271
    """d: adaptive mode halves c_kl when KL < d/1.5 and doubles it when KL > 1.5·d. Default:
    the tuned value [ours]."""
    adaptive: bool = True
    """False keeps c_kl fixed."""


@dataclasses.dataclass(frozen=True)
class SPOConfig(EstimateConfig):
    """Options of `spo` (Xie et al. 2024); its ε is --clip-coef."""


@dataclasses.dataclass(frozen=True)
class VtraceConfig:
    """V-trace truncation levels for `impala`, recomputed at every minibatch."""

    rho_bar: float = 1.0
    """ρ̄: truncation of the importance weight in δ_t and the advantage."""
    c_bar: float = 1.0
    """c̄: truncation of the trace coefficient c_t = λ·min(c̄, π/β)."""


@dataclasses.dataclass(frozen=True)
class VacoConfig(EstimateConfig):
    """Options of `vaco` (which parts are [paper] and which [ours]: `jaxvaco.algos.vaco`).
    Defaults [ours]: anchor β, the learner's critic with GAE, batch filter at the tuned δ.
    The paper's recipe is `--vaco.anchor learner --vaco.critic learner --vaco.advantages
    vtrace --vaco.advantage-form weighted --vaco.delta 0.2`."""

    critic: Critic = "learner"
    """Alignment of the critic: learner [paper, ours default] recomputes V_T once per
    iteration; behaviour keeps the recorded values (filter only)."""
    advantage_form: AdvantageForm = "normalize_then_weight"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t [paper];
    normalize_then_weight [ours] = normalise the unweighted Â, then multiply by ρ_t."""
    delta: float = 0.0669
    """δ: TV threshold of the filter. Default: the tuned value [ours]; the paper's is 0.2."""
    filter: Literal["batch", "sample", "none"] = "batch"
    """batch: filter when the minibatch TV estimate D ≥ δ; sample: when ½|r_i − 1| ≥ δ;
    none: keep every sample (a plain importance-weighted policy gradient)."""
    anchor: Anchor = "behaviour"
    """Denominator of r: β (behaviour, default: the constraint covers backward and forward
    lag) or π_T (learner: forward lag only [paper])."""
    kl_penalty: bool = False
    """[ours] Add PPO-KL's adaptive penalty c_kl·KL(β‖π_θ) (--ppo-kl.kl-coef, its start,
    and --ppo-kl.target-kl) to the filtered objective."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation, logged apart from training returns."""

    every_chunks: int = 5
    """Evaluate every this many chunks (and at the end); 0 = only at the end."""
    num_episodes: int = 16
    """Episodes per evaluation, run in parallel, each mode (greedy and stochastic)."""


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """Training over several devices (`jaxvaco.distributed`).

    axis "envs": data-parallel learning; each device holds N/D envs, acts with its own copy of
    the parameters refreshed every `sync_interval` iterations, and the gradients of every SGD
    step are averaged over the devices. axis "seeds": the independent runs (seeds × grid) are
    split over the devices instead, with no communication.
    """

    num_devices: int = 1
    """D: devices in the mesh (1 = the ordinary single-device program)."""
    axis: Literal["envs", "seeds"] = "envs"
    """What the devices split: the envs of each run, or the runs."""
    sync_interval: int = 1
    """S: the actors on a device refresh their parameters from the learner every S iterations
    (1 = every iteration, no lag). Only with axis envs."""
    stagger: bool = False
    """Device d refreshes at iterations T with (T + d) mod S == 0 (asynchronous workers);
    otherwise all devices refresh together at T mod S == 0."""
    shuffle: Literal["global", "local"] = "global"
    """Minibatches with axis envs. "global": every device gathers the whole batch, the
    minibatches are the single-device run's (one shuffle of all N envs) and device d trains
    on the d-th slice of each; advantage normalisation and VACO's batch filter use
    minibatch-wide statistics, so S = 1 equals the single-device run up to reduction order.
    "local": each device shuffles only its own envs and normalises per device (no batch
    communication; the usual data-parallel PPO)."""
    multihost: bool = False
    """Call `jax.distributed.initialize` before building the mesh (one process per host)."""
    coordinator_address: str = ""
    """host:port of process 0; empty = read by JAX from the environment (SLURM, ...)."""
    num_processes: int = 0
    """Processes in the job; 0 = from the environment."""
    process_id: int = -1
    """This process's index; -1 = from the environment."""
