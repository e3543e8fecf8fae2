"""The README's rule table, generated from rule metadata so it cannot drift from the code.

Regenerate with ``python -P -m trainlint.rule_table --write``; a test fails when README.md is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainlint.analysis.registry import all_rules

BEGIN = "<!-- rule-table:begin -->"
END = "<!-- rule-table:end -->"


def rule_table_markdown() -> str:
    rows = ["| code | name | default | fix | what it catches |", "|---|---|---|---|---|"]
    for rule in all_rules():
        fix = "yes" if rule.fixable else ""
        rows.append(f"| [{rule.code}]({rule.help_uri()}) | `{rule.name}` | {rule.severity.label} | {fix} | {rule.summary()} |")
    return "\n".join(rows)


def replace_table(readme: str) -> str:
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{rule_table_markdown()}\n{END}{tail}"


if __name__ == "__main__":
    path = Path(__file__).resolve().parent.parent / "README.md"
    updated = replace_table(path.read_text(encoding="utf-8"))
    if "--write" in sys.argv:
        path.write_text(updated, encoding="utf-8")
    else:
        sys.stdout.write(rule_table_markdown() + "\n")
