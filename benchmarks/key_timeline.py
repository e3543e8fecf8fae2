"""Where each key's time went, from one run of ``nvim_typing.py --timeline``: Neovim's record (keys,
changes sent, pulls sent and cancelled, answers) and the server's (``server/timeline.py``: messages
read and written, analyses queued, started, stopped and finished), on one clock.

A key is fresh when a report of its text's analysis (or a later one) reached Neovim before the next
key. Every other key is put down to the first stage of that path that was not done by then:

- ``client debounce``: Neovim had not sent the key's change yet (``debounce_text_changes``);
- ``event loop``: the change had left Neovim, but the server's event loop had not handled it;
- ``behind an older analysis``: an analysis of an older text held the lane;
- ``lane not started``: nothing held the lane, yet the key's analysis had not started (the worker
  thread waiting for a core or for the interpreter lock, or no pull asked for it);
- ``analysis (CPU)`` / ``analysis (waiting for a core)``: the key's analysis ran past the next key;
  the first when it used at least half of that wall time as CPU, else the second;
- ``no pull to answer``: the analysis was done in time, but no pull was waiting for it (Neovim had
  been answered from an older analysis and no later change made it pull again);
- ``reply``: the analysis was done and a pull waited, but the answer was written after the next key;
- ``client read``: written in time, read by Neovim after the next key.
"""

from __future__ import annotations

import re
from collections import Counter

RESULT_ID = re.compile(r"^(\d+):.*?(?:~(\d+))?$")
STAGES = ("client debounce", "event loop", "behind an older analysis", "lane not started", "analysis (CPU)",
          "analysis (waiting for a core)", "no pull to answer", "reply", "client read")


def analysed_version(result_id: str | None) -> int | None:
    match = RESULT_ID.match(result_id or "")
    if not match:
        return None
    return int(match.group(2) or match.group(1))


def server_events(record: dict, lines: list[dict]) -> list[dict]:
    """The server's record on Neovim's clock (milliseconds since the Lua script started)."""
    t0 = record["t0_ns"]
    events = []
    for line in lines:
        event = dict(line, t=(line["t"] - t0) / 1e6)
        if event.get("arrived"):
            event["arrived"] = (event["arrived"] - t0) / 1e6
        events.append(event)
    return events


def first(items, predicate):
    return next((item for item in items if predicate(item)), None)


def key_stages(record: dict) -> list[dict]:
    """One row per key: its times along the path to its report and the stage that made it late."""
    keys, key_ms = record["keys"], record["key_ms"]
    answers = [a for a in record["answers"] if a["kind"] in ("full", "unchanged")]
    return [
        _key_row(record["server_timeline"], record["changes"], answers, index, key,
                 keys[index + 1]["t"] if index + 1 < len(keys) else key["t"] + key_ms)
        for index, key in enumerate(keys)
    ]


def _key_row(events: list[dict], changes: list[dict], answers: list[dict], index: int, key: dict, deadline: float) -> dict:
    t, version = key["t"], key["version"]

    def of_key(value: int | None) -> bool:
        return value is not None and value >= version

    received = first(answers, lambda a: a["t"] >= t and of_key(analysed_version(a.get("result_id"))))
    change = first(changes, lambda c: of_key(c["version"]))
    read = first(events, lambda e: e["event"] == "read" and e.get("method") == "textDocument/didChange" and of_key(e.get("version")))
    started = first(events, lambda e: e["event"] == "started" and of_key(e.get("version")))
    finished = first(events, lambda e: e["event"] == "finished" and of_key(e.get("version")))
    written = first(events, lambda e: e["event"] == "written" and of_key(analysed_version(e.get("result_id"))))
    row = {"key": index, "t": round(t, 1), "version": version,
           "change_sent": _at(change, t), "change_read": _at(read, t), "started": _at(started, t),
           "finished": _at(finished, t), "written": _at(written, t), "received": _at(received, t),
           "next_key": round(deadline - t, 1)}
    if finished is not None:
        row["analysis_cpu"] = round(finished["cpu"] / 1e6, 1)
    row["stage"] = _stage(events, deadline, change, read, started, finished, written, received)
    return row


def _at(item: dict | None, since: float) -> float | None:
    return None if item is None else round(item["t"] - since, 1)


def _stage(events, deadline, change, read, started, finished, written, received) -> str:
    if received is not None and received["t"] < deadline:
        return "fresh"
    if change is None or change["t"] >= deadline:
        return "client debounce"
    if read is None or read["t"] >= deadline:
        return "event loop"
    if started is None or started["t"] >= deadline:
        running = [e for e in events if e["event"] == "started" and e["t"] < deadline
                   and _end(events, e) is not None and _end(events, e)["t"] > read["t"]]
        return "behind an older analysis" if running else "lane not started"
    if finished is None or finished["t"] >= deadline:
        end = finished["t"] if finished is not None else deadline
        cpu = finished["cpu"] / 1e6 if finished is not None else 0.0
        return "analysis (CPU)" if cpu >= (end - started["t"]) / 2 else "analysis (waiting for a core)"
    if written is None or written["t"] >= deadline:
        pulls = [e for e in events if e["event"] == "read" and e.get("method") == "textDocument/diagnostic"
                 and e["t"] <= finished["t"]]
        answered = {e.get("id") for e in events if e["event"] == "written" and e["t"] <= finished["t"]}
        waiting = [p for p in pulls if p.get("id") not in answered]
        return "reply" if waiting else "no pull to answer"
    return "client read"


def _end(events: list[dict], started: dict) -> dict | None:
    """The stop or finish of the analysis ``started`` began."""
    after = events.index(started)
    return first(events[after + 1:], lambda e: e["event"] in ("finished", "stopped") and e.get("thread") == started.get("thread"))


def summary(rows: list[dict]) -> dict:
    counts = Counter(row["stage"] for row in rows)
    return {stage: counts[stage] for stage in ("fresh", *STAGES) if counts[stage]}
