"""Videos of evaluation episodes (`jaxvaco eval --video FILE`).

Frames come from the environment's renderer: for gymnax, matplotlib drawings of the
classic-control envs (gymnax's own need gymnasium with pygame) and gymnax's visualizer
(matplotlib) for the others that have one (`GYMNAX_RENDERED`); MuJoCo's renderer for
Brax, headless with EGL or OSMesa (`headless_gl`; the GL platform is chosen before MuJoCo
is first imported).
They are written as GIF with Pillow (which matplotlib brings) or as MP4 with an ffmpeg
executable (imageio-ffmpeg's, `pip install "jaxvaco[video]"`, or one on PATH). Every
check that can fail (format, folder, encoder, renderer) runs before anything is computed,
and the file is written atomically (a temporary file and a rename).
"""

from __future__ import annotations

import ctypes.util
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.core.config import ConfigError

FORMATS = (".gif", ".mp4")
GYMNAX_RENDERED = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                   "MountainCarContinuous-v0", "Catch-bsuite", "Asterix-MinAtar",
                   "Breakout-MinAtar", "Freeway-MinAtar", "Seaquest-MinAtar",
                   "SpaceInvaders-MinAtar", "Pong-misc", "PointRobot-misc", "MetaMaze-misc",
                   "FourRooms-misc")
"""The gymnax envs with a renderer: classic control (drawn here) and those
`gymnax.visualize.Visualizer` draws with matplotlib."""
MAX_FRAMES = 300
"""Longer episodes are rendered every k-th step (the frame rate divided by k)."""
MAX_FPS = 50


def ffmpeg_executable() -> str | None:
    """imageio-ffmpeg's bundled ffmpeg, else `ffmpeg` on PATH, else None."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return shutil.which("ffmpeg")


def check_video_path(path: Path) -> None:
    """Refuse (ConfigError) a video file that cannot be written: another format than
    .gif/.mp4, a folder that does not exist or is not writable, .mp4 without ffmpeg."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"--video {path}: videos are written as .gif or .mp4, not "
                          f"{suffix or 'a file without a suffix'}.")
    folder = path.parent
    if path.is_dir():
        raise ConfigError(f"--video {path} is a folder: give a file name ending in {suffix}.")
    if not folder.is_dir():
        raise ConfigError(f"--video {path}: the folder {folder} does not exist.")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists()
                                                    and not os.access(path, os.W_OK)):
        raise ConfigError(f"--video {path}: cannot write there (permission denied); choose "
                          "another path.")
    if suffix == ".mp4" and ffmpeg_executable() is None:
        raise ConfigError(f"--video {path}: writing .mp4 needs ffmpeg: pip install "
                          "\"jaxvaco[video]\" (imageio-ffmpeg) or put ffmpeg on PATH; or "
                          "write a .gif.")


def headless_gl() -> str:
    """Make MuJoCo's renderer work without a display: MUJOCO_GL=egl (or osmesa) unless
    set already, then draw one tiny frame. Returns the platform; ConfigError when there is
    no headless OpenGL. Call it before brax (which imports MuJoCo) is imported."""
    if "MUJOCO_GL" not in os.environ:
        for platform, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
            if ctypes.util.find_library(library):
                os.environ["MUJOCO_GL"] = platform
                break
        else:
            raise ConfigError("--video: MuJoCo's renderer needs a headless OpenGL and neither "
                              "EGL nor OSMesa was found: install libegl1 (or libosmesa6), or "
                              "set MUJOCO_GL.")
    platform = os.environ["MUJOCO_GL"]
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
        renderer = mujoco.Renderer(model, 8, 8)
        renderer.update_scene(mujoco.MjData(model))
        renderer.render()
        renderer.close()
    except Exception as error:  # noqa: BLE001 - GL libraries fail in many ways
        reason = " ".join(str(error).split())[:200]
        raise ConfigError(f"--video: MuJoCo cannot render headless with MUJOCO_GL={platform} "
                          f"({type(error).__name__}: {reason}); install EGL (libegl1) or "
                          "OSMesa (libosmesa6), or set MUJOCO_GL to one that works.") from None
    return platform


def check_renderable(env: str) -> None:
    """Refuse (ConfigError) an env without a renderer; for Brax, set up headless GL."""
    from jaxvaco.core.envs import BRAX_ENV_NAMES, BRAX_PREFIX

    if env in BRAX_ENV_NAMES or env.startswith(BRAX_PREFIX):
        headless_gl()
    elif env not in GYMNAX_RENDERED:
        raise ConfigError(f"--video: {env} has no renderer (gymnax draws "
                          f"{', '.join(GYMNAX_RENDERED)}; Brax envs render with MuJoCo); "
                          "evaluate without --video.")


def stride(length: int, max_frames: int = MAX_FRAMES) -> int:
    return max(1, math.ceil(length / max_frames))


def render_episode(episode: Any, max_frames: int = MAX_FRAMES, size: tuple[int, int] = (240, 320)
                   ) -> tuple[list[np.ndarray], float]:
    """RGB frames [H, W, 3] of a `jaxvaco.host.policy_eval.Episode` and their frame rate, in real
    time: every k-th step where the env's own rate is above `MAX_FPS` or the episode is
    longer than `max_frames`. Brax frames are `size` (height, width)."""
    import jax

    env = episode.env
    brax = env.spec.family == "brax"
    native = 1.0 / float(env._env.dt) if brax else (
        20.0 if env.spec.name in CLASSIC_CONTROL else 10.0)
    step = max(stride(episode.length, max_frames), math.ceil(native / MAX_FPS - 1e-9))
    picks = range(0, episode.length, step)
    states = [jax.tree.map(lambda x, i=i: x[i], episode.states) for i in picks]
    if brax:
        from brax.io import image

        frames = image.render_array(env._env.sys, states, height=size[0], width=size[1])
    else:
        frames = gymnax_frames(env, states, np.cumsum(episode.rewards)[::step])
    return [np.asarray(frame, np.uint8) for frame in frames], min(native / step, MAX_FPS)


def gymnax_frames(env: Any, states: list, returns: np.ndarray) -> list[np.ndarray]:
    """Frames of a gymnax episode: classic control drawn here with matplotlib (gymnax's
    own drawings of them go through gymnasium and pygame), the other envs by
    `gymnax.visualize.Visualizer`, frame by frame into an off-screen figure."""
    name = env.spec.name
    if name in CLASSIC_CONTROL:
        return classic_frames(name, env._params, states, returns)
    import matplotlib.pyplot as plt
    from gymnax.visualize import Visualizer

    visualizer = Visualizer(env._env, env._params, states, returns)
    try:
        visualizer.init()
        frames = []
        for i in range(len(states)):
            visualizer.update(i)
            frames.append(canvas_rgb(visualizer.fig))
    finally:
        plt.close(visualizer.fig)
    return frames


def canvas_rgb(figure: Any) -> np.ndarray:
    figure.canvas.draw()
    return np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()


CLASSIC_CONTROL = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                   "MountainCarContinuous-v0")


def classic_frames(name: str, params: Any, states: list, returns: np.ndarray
                   ) -> list[np.ndarray]:
    """Classic-control states drawn with matplotlib (an Agg canvas, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    wide = name in ("CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0")
    figure = Figure(figsize=(6.0, 3.0) if wide else (4.0, 4.0), dpi=80)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    frames = []
    for i, state in enumerate(states):
        ax.clear()
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_aspect("equal")
        DRAW[name](ax, state, params)
        ax.set_title(f"{name}: step {int(state.time) + 1}, return {float(returns[i]):.1f}",
                     fontsize=10)
        figure.tight_layout()
        frames.append(canvas_rgb(figure))
    return frames


def draw_cartpole(ax: Any, state: Any, params: Any) -> None:
    from matplotlib.patches import Rectangle

    limit, pole = float(params.x_threshold) * 1.25, 2 * float(params.length)
    x, theta = float(state.x), float(state.theta)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-0.4, pole + 0.6)
    ax.axhline(0, color="0.3", linewidth=1)
    for edge in (-float(params.x_threshold), float(params.x_threshold)):
        ax.axvline(edge, color="0.7", linestyle=":", linewidth=1)
    ax.add_patch(Rectangle((x - 0.25, 0.0), 0.5, 0.3, color="0.2"))
    ax.plot([x, x + pole * np.sin(theta)], [0.3, 0.3 + pole * np.cos(theta)],
            color="tab:orange", linewidth=6, solid_capstyle="round")


def draw_pendulum(ax: Any, state: Any, params: Any) -> None:
    theta = float(state.theta)
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.plot([0, np.sin(theta)], [0, np.cos(theta)], color="tab:red", linewidth=8,
            solid_capstyle="round")
    ax.plot([0], [0], "o", color="0.2")


def draw_acrobot(ax: Any, state: Any, params: Any) -> None:
    a1, a2 = float(state.joint_angle1), float(state.joint_angle2)
    l1, l2 = float(params.link_length_1), float(params.link_length_2)
    p1 = (l1 * np.sin(a1), -l1 * np.cos(a1))
    p2 = (p1[0] + l2 * np.sin(a1 + a2), p1[1] - l2 * np.cos(a1 + a2))
    reach = (l1 + l2) * 1.1
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.axhline(l1, color="0.6", linestyle=":", linewidth=1)  # the goal: the tip above it
    ax.plot([0, p1[0], p2[0]], [0, p1[1], p2[1]], color="tab:blue", linewidth=6,
            solid_capstyle="round", marker="o", markerfacecolor="0.2")


def draw_mountain_car(ax: Any, state: Any, params: Any) -> None:
    low, high = float(params.min_position), float(params.max_position)
    height = lambda x: np.sin(3 * x) * 0.45 + 0.55  # noqa: E731
    xs = np.linspace(low, high, 200)
    ax.set_xlim(low, high)
    ax.set_ylim(0, 1.2)
    ax.plot(xs, height(xs), color="0.3")
    goal = float(params.goal_position)
    ax.plot([goal, goal], [height(goal), height(goal) + 0.15], color="tab:green", linewidth=2)
    x = float(state.position)
    ax.plot([x], [height(x) + 0.03], "s", color="tab:red", markersize=12)


DRAW = {"CartPole-v1": draw_cartpole, "Pendulum-v1": draw_pendulum,
        "Acrobot-v1": draw_acrobot, "MountainCar-v0": draw_mountain_car,
        "MountainCarContinuous-v0": draw_mountain_car}


def write_video(frames: list[np.ndarray], path: Path, fps: float) -> Path:
    """Write the frames as a GIF (Pillow) or MP4 (ffmpeg), atomically."""
    if not frames:
        raise ValueError("no frames to write")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if path.suffix.lower() == ".gif":
            from PIL import Image

            images = [Image.fromarray(frame) for frame in frames]
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                           duration=max(20, round(1000 / fps)), loop=0)
        else:
            write_mp4(frames, tmp, fps)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_mp4(frames: list[np.ndarray], path: Path, fps: float) -> None:
    """H.264 via an ffmpeg process fed raw RGB frames (sizes padded to even numbers)."""
    executable = ffmpeg_executable()
    if executable is None:
        raise ConfigError("writing .mp4 needs ffmpeg: pip install \"jaxvaco[video]\" "
                          "(imageio-ffmpeg) or put ffmpeg on PATH.")
    height, width = frames[0].shape[:2]
    command = [executable, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
               "-s", f"{width}x{height}", "-r", f"{fps:.6g}", "-i", "-",
               "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264",
               "-pix_fmt", "yuv420p", "-f", "mp4", str(path)]
    result = subprocess.run(command, input=b"".join(np.ascontiguousarray(f).tobytes()
                                                     for f in frames),
                            capture_output=True, check=False)
    if result.returncode:
        reason = " ".join(result.stderr.decode(errors="replace").split())[:200]
        raise OSError(f"ffmpeg could not write {path} (exit {result.returncode}: {reason})")
