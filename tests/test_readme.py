import re
from pathlib import Path

from trainlint.rule_table import BEGIN, END, replace_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_table_matches_the_rules():
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert replace_table(text) == text, "README.md's rule table is stale: run `.venv/bin/python -P -m trainlint.rule_table --write`"


def test_readme_speed_claim_is_the_measured_one():
    """The README quotes docs/server.md's measurement, not a number of its own: the p95 of each run
    on the 3,079-line document (as a range) and on the 2,368-line one."""
    server = (README.parent / "docs" / "server.md").read_text(encoding="utf-8")
    row = next(line for line in server.splitlines() if line.startswith("| One-character edit to fresh report"))
    longer, shorter = (cell.strip() for cell in row.strip("|").split("|")[1:3])
    runs = [int(number) for number in re.findall(r"\d+", longer)]
    (short,) = re.findall(r"\d+", shorter)
    readme = README.read_text(encoding="utf-8")
    assert f"fresh diagnostics in {short} ms (p95), {min(runs)}–{max(runs)} ms on 3,079 lines ({len(runs)} runs)" in " ".join(readme.split())
