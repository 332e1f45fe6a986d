"""The probes' judges: each module declares one probe's SPEC and the pure functions that turn its recorded cases
into verdicts (`judge`), and optionally `summarize` and `judge_inputs`. `kb validate` re-judges recorded evidence
with these alone; the programs that produce the cases (`cases`, `run`) live in probes/<name>.py, which imports its
judge module from here (design.md §3: layers import downward only)."""

from pathlib import Path

PROBES = Path(__file__).resolve().parents[3] / "probes"
"""The probe programs' folder (the repository's, or the installed wheel's `probes` package): the data files a judge
reads (the boot probes' model configs) lie under probes/<name>/."""
REPO = PROBES.parent
"""The repository root (in a wheel, site-packages): recorded grids are cited by paths relative to it."""
