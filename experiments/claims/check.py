"""Measure the README's claims again and compare them with the recorded values.

    python -m experiments.check_claims --fast            # the cheap, deterministic set (CI)
    python -m experiments.check_claims                   # every claim (hours: see --max-minutes)
    python -m experiments.check_claims --max-minutes 10  # skip claims estimated above 10 min
    python -m experiments.check_claims --only default-16-seeds throughput-ref
    python -m experiments.check_claims --only default-16-seeds --record   # re-record
    python -m experiments.check_claims --only startup --record --render   # and the tables

Prints one line per claim (claim, recorded, now, verdict) and exits with 1 when a claim
failed, or when the generated tables (README.md and docs/) are not what the recorded claims
give (`python -m experiments.render_readme` rewrites them). The same table, with the rules,
is the report: written to --out, or, for a check of every claim (no --fast or --only), to
experiments/results/check_claims.md, the report of the last full check.

With --record, each claim that was measured becomes the recorded value, with the current
commit (marked "+dirty" when the working tree has uncommitted changes) and date; with
--render too, the generated tables (README.md and docs/) are then rewritten from the new
record.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
import traceback
from pathlib import Path

from experiments.claims import render
from experiments.claims.record import (
    REPO,
    RESULTS,
    Claim,
    Context,
    load_record,
    recorded_for,
    save_record,
)
from experiments.claims.registry import BY_ID, CLAIMS

PASS, FAIL, SKIP, ERROR, NEW = "pass", "FAIL", "skipped", "ERROR", "recorded"


def current_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def commit_date(commits: str) -> str:
    """Date of the last commit named in `commits` ("abc1234, def5678"): when the data was
    last added to; '' if none."""
    if not commits:
        return ""
    last = commits.split(",")[-1].split()[0]
    return subprocess.run(["git", "show", "-s", "--format=%ad", "--date=format-local:%Y-%m-%d "
                           "%H:%M UTC", last], cwd=REPO, capture_output=True,
                          text=True, env={"TZ": "UTC"}).stdout.strip()


def check(claim: Claim, recorded: dict | None, ctx: Context
          ) -> tuple[str, dict | None, str, float]:
    start = time.perf_counter()
    try:
        now = claim.measure(ctx)
    except NotImplementedError as error:
        return SKIP, None, f"not automated: {error}", time.perf_counter() - start
    except Exception as error:  # a claim that cannot be measured fails, with the reason
        traceback.print_exc()
        return ERROR, None, f"{type(error).__name__}: {error}", time.perf_counter() - start
    seconds = time.perf_counter() - start
    if recorded is None:
        return NEW, now, "no recorded value", seconds
    ok, note = claim.compare(recorded["value"], now)
    return (PASS if ok else FAIL), now, note, seconds


def cell(text: str, width: int = 60) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= width else text[: width - 1] + "…"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="only the cheap claims (CI)")
    parser.add_argument("--only", nargs="+", metavar="ID", choices=list(BY_ID),
                        help="these claims only")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="skip claims whose estimated cost is above this")
    parser.add_argument("--record", action="store_true",
                        help="store what was measured as the recorded values")
    parser.add_argument("--render", action="store_true",
                        help="then rewrite the generated tables (README, docs/) from the record")
    parser.add_argument("--out", type=Path, help="where the markdown report goes (default: "
                        "experiments/results/check_claims.md for a check of every claim)")
    return parser.parse_args(argv)


def report_path(args: argparse.Namespace) -> Path | None:
    """--out, else check_claims.md for a check of every claim, else none (printed only)."""
    if args.out:
        return args.out
    return None if args.fast or args.only else RESULTS / "check_claims.md"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    selected = [BY_ID[i] for i in args.only] if args.only else list(CLAIMS)
    if args.fast:
        selected = [c for c in selected if c.fast]
    record = load_record()
    commit, date = current_commit(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"# check_claims{' --fast' if args.fast else ''}: commit {commit}, {date}", "",
             f"Load average at the start (1/5/15 min): {load} on {os.cpu_count()} CPUs.", "",
             "| claim | kind | recorded (commit) | now | verdict | s |",
             "|---|---|---|---|---|---|"]
    failed, measured = False, {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="check_claims_") as tmp:
        ctx = Context(Path(tmp))
        for claim in selected:
            old = recorded_for(claim, record)
            shown_old = f"{claim.show(old['value'])} ({old['commit']})" if old else "—"
            if args.max_minutes is not None and claim.minutes > args.max_minutes:
                verdict, now, note, seconds = SKIP, None, \
                    f"estimated {claim.minutes:g} min > --max-minutes", 0.0
            else:
                print(f"measuring {claim.id} (about {claim.minutes:g} min) ...", flush=True)
                verdict, now, note, seconds = check(claim, old, ctx)
            failed |= verdict in (FAIL, ERROR)
            shown_now = claim.show(now) if now is not None else "—"
            line = (f"| {claim.id} | {claim.kind} | {cell(shown_old)} | {cell(shown_now)} | "
                    f"**{verdict}**: {cell(note, 90)} | {seconds:.0f} |")
            lines.append(line)
            print(line, flush=True)
            if args.record and now is not None and not claim.reruns:
                measured[claim.id] = {"value": now, "commit": claim.data_commit or commit,
                                      "date": commit_date(claim.data_commit) or date,
                                      "command": claim.command}
    if measured:  # merged into the file as it is now (another check may have recorded too)
        save_record({**load_record(), **measured})
    if args.render:
        render.render_all(load_record())
    problems = render.out_of_sync(load_record())
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    sync = "in sync with claims.json" if not problems else \
        "OUT OF SYNC: " + ", ".join(problems)
    lines += ["", f"Load average at the end: {load}.", f"README generated tables: {sync}.",
              f"Total {time.perf_counter() - start:.0f} s. Rules:", ""]
    lines += [f"- `{c.id}` ({c.command}): {c.rule}" for c in selected]
    failed |= bool(problems)
    print("\n".join(lines[-len(selected) - 3:-len(selected)]))
    if out := report_path(args):
        out.write_text("\n".join(lines) + "\n")
        print(f"written to {out}")
    print("FAILED" if failed else "all claims hold")
    return 1 if failed else 0
