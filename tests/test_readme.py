import re
from pathlib import Path

from trainlint.rule_table import BEGIN, END, replace_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_table_matches_the_rules():
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert replace_table(text) == text, "README.md's rule table is stale: run `python -m trainlint.rule_table --write`"


def test_readme_speed_claim_is_the_measured_one():
    """The README quotes docs/server.md's measurement, not a number of its own."""
    server = (README.parent / "docs" / "server.md").read_text(encoding="utf-8")
    row = next(line for line in server.splitlines() if line.startswith("| One-character edit to fresh report"))
    measured = re.findall(r"p95 (\d+) ms", row)[-1]  # the current column
    assert f"fresh diagnostics in {measured} ms (p95)" in README.read_text(encoding="utf-8")
