"""Where an edit's time goes: CPU time of each phase of the analysis, in process, no server.

    .venv/bin/python benchmarks/edit_breakdown.py SCRIPT [SCRIPT ...] [--repeat 20]

Opens the scripts one after another as one document (real training scripts: see
benchmarks/README.md for the diffusers ones), analyses it fresh, then edits the body of the first
training loop (``for step, batch in enumerate(...)``) as someone typing there would, and reports
the median CPU milliseconds of each phase, per kind of edit:

- parse: ``ModuleAnalysis`` / ``updated`` (splitting, parsing, splicing, what stays valid);
- flow: the flow analysis of every scope the edit can reach;
- rules: the rules' checks and the findings' assembly (the rest of ``findings_for``);

for a fresh analysis, one character typed on a line that parses, one on a line that does not
(a statement half typed), and Enter. Every incremental result is checked against a fresh
analysis of the same text. The numbers are CPU time of this process (``time.process_time``),
so a busy machine changes them less than wall-clock times.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from functools import partial
from pathlib import Path

from trainlint.analysis.engine import collector_paused, findings_for, select_rules
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.settings import AnalysisSettings

TRAINING_LOOP = re.compile(r"^\s+for step, batch in enumerate\(")
SETTINGS = AnalysisSettings()
RULES = select_rules(SETTINGS)


def phases(make_module) -> tuple[ModuleAnalysis, list, dict[str, float]]:
    with collector_paused():
        started = time.process_time()
        module = make_module()
        parsed = time.process_time()
        module.prepare_scopes()
        walked = time.process_time()
        findings = findings_for(module, SETTINGS, RULES)
        done = time.process_time()
    return module, findings, {"parse": parsed - started, "flow": walked - parsed, "rules": done - walked}


def same(one: list, other: list) -> bool:
    return [(f.line, f.column, f.code, f.message) for f in one] == [(f.line, f.column, f.code, f.message) for f in other]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scripts", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    text = "\n".join(path.read_text(encoding="utf-8") for path in args.scripts)
    lines = text.split("\n")
    loop = next(index for index, line in enumerate(lines) if TRAINING_LOOP.match(line))
    body = loop + 2
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]

    runs: dict[str, list[dict[str, float]]] = {"fresh analysis": [], "one character, line parses": [],
                                               "one character, line half typed": [], "Enter": []}
    module, _, cost = phases(lambda: ModuleAnalysis(text, "train.py"))
    runs["fresh analysis"].append(cost)
    for _ in range(2):
        runs["fresh analysis"].append(phases(lambda: ModuleAnalysis(text, "train.py"))[2])

    lines.insert(body + 1, indent + "seen = 0")
    target = body + 1
    for repeat in range(args.repeat):
        for kind, new_line, extra in (
            ("one character, line parses", indent + "seen = " + "1" * (repeat + 2), None),
            ("one character, line half typed", indent + "seen = seen +" + " " * (repeat + 1), None),
            ("Enter", indent + "seen = 0", indent),
        ):
            lines[target] = new_line
            if extra is not None:
                lines.insert(target + 1, extra)
            edited = "\n".join(lines)
            module, findings, cost = phases(partial(module.updated, edited))
            runs[kind].append(cost)
            if repeat < 3:  # the property the incremental analysis keeps: equal to a fresh analysis
                assert same(findings, phases(partial(ModuleAnalysis, edited, "train.py"))[1]), kind

    print(f"{len(text.splitlines())} lines; CPU ms, median of {args.repeat} (fresh: of 3)")
    print(f"{'':34}{'parse':>8}{'flow':>8}{'rules':>8}{'total':>8}")
    for kind, costs in runs.items():
        medians = {phase: statistics.median(cost[phase] for cost in costs) * 1000 for phase in ("parse", "flow", "rules")}
        total = statistics.median(sum(cost.values()) for cost in costs) * 1000
        print(f"{kind:34}{medians['parse']:8.0f}{medians['flow']:8.0f}{medians['rules']:8.0f}{total:8.0f}")


if __name__ == "__main__":
    main()
