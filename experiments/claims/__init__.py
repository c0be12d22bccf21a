"""The claims registry: every figure the README and the results pages state, as data:
what it is, the command behind it, how to measure it again, and the rule under which a new
measurement reproduces it.

It lives apart from the experiments it checks, and imports go one way: this package ->
`experiments.<experiment>` (to recompute tables from committed data) -> the jaxvaco
public API; no experiment imports it. Its modules:

* `record` (a leaf): the paths, the `Claim` and its `Context`, claims.json read and written;
* `rules`: how a measurement is compared with the record, and shown in one line;
* `data`: tables recomputed from the committed results (the cheap, deterministic claims);
* `runs`: measurements that train or time something again (subprocesses);
* `registry`: `CLAIMS`, the list of every claim (add a claim there);
* `blocks`: the generated README and docs tables, one function per block (`BLOCKS`);
* `render`: writes those blocks between their markers and checks they are current;
* `check`: measures claims again and compares (`python -m experiments.check_claims`).

The recorded values live in experiments/results/claims.json (one entry per claim: the
value, the commit it was measured on, the date). `python -m experiments.check_claims`
measures the claims again and compares; `python -m experiments.render_readme` writes the
README's tables from the recorded values (between `<!-- claims:BLOCK -->` markers).

Kinds of claim and their tolerance rules:

* data: a table recomputed from the committed tidy CSVs (deterministic; must be equal to
  the printed precision). These are cheap (`fast`): they check that the README's tables
  are what the committed data give.
* seed-count: a learning result stated as "solved in n of S seeds"; the rule is the
  stated criterion itself (e.g. >= 15 of 16 seeds with greedy return >= 475).
* statistical: a learning result stated as a mean; the new mean must lie inside the
  recorded 95% confidence interval (or, for a rerun sweep, in most cells: see the claim).
* speed: a throughput ratio, or a whole-process wall-time ratio against the reference
  (`startup`); the new ratio must lie within a band around the recorded one (CPU timings
  on a shared machine are noisy, so speed claims are never `fast`).

`minutes` is a rough cost on the 2-core development CPU; `check_claims --max-minutes`
skips the claims above it and says so in its output.
"""
