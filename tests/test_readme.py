from pathlib import Path

from trainlint.rule_table import BEGIN, END, replace_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_table_matches_the_rules():
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert replace_table(text) == text, "README.md's rule table is stale: run `python -m trainlint.rule_table --write`"
