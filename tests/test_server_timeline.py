"""The server's timeline (``TRAINLINT_TIMELINE``, ``server/timeline.py``): what
``benchmarks/nvim_typing.py --timeline`` lines up with Neovim's record to tell where each key's time
went. A key's path through the real server is there in order, with the text version each step is of;
and ``benchmarks/key_timeline.py`` puts a late key down to the stage that was not done in time."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lsp_pipe import RawServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import key_timeline  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "buggy" / "lm_finetune.py"


def test_a_key_s_path_through_the_server_is_recorded_in_order(tmp_path, monkeypatch):
    record = tmp_path / "timeline.jsonl"
    monkeypatch.setenv("TRAINLINT_TIMELINE", str(record))
    script = tmp_path / "train.py"
    text = EXAMPLE.read_text(encoding="utf-8")
    script.write_text(text, encoding="utf-8")
    uri = script.as_uri()
    server = RawServer()
    try:
        server.initialize()
        server.open(uri, text)
        server.diagnostics(uri)
        server.change(uri, 1, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "\n"}])
        server.diagnostics(uri)
    finally:
        server.close()
    deadline = time.monotonic() + 10
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    events = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)

    def index(event: str, **fields) -> int:
        return next(i for i, e in enumerate(events) if e["event"] == event and all(e.get(k) == v for k, v in fields.items()))

    change = index("read", method="textDocument/didChange", version=1)
    queued, started, finished = index("queued", version=1), index("started", version=1), index("finished", version=1)
    answered = next(i for i, e in enumerate(events) if e["event"] == "written" and (e.get("result_id") or "").startswith("1:"))
    assert change < queued < started < finished < answered
    assert events[started]["thread"].startswith("trainlint-analysis") and events[answered]["thread"] == "MainThread"
    assert events[finished]["cpu"] > 0
    assert all(e["arrived"] <= e["t"] for e in events if e["event"] == "read")


def test_a_late_key_is_put_down_to_the_first_stage_not_done_in_time():
    keys = [{"t": 0.0, "version": 1}, {"t": 100.0, "version": 2}, {"t": 200.0, "version": 3}]
    record = {
        "key_ms": 100, "keys": keys, "t0_ns": 0,
        "changes": [{"t": 1.0, "version": 1}, {"t": 201.0, "version": 3}],  # the second key's change waited for the third
        "answers": [{"t": 30.0, "kind": "full", "result_id": "1:0:9"}, {"t": 340.0, "kind": "full", "result_id": "3:0:7"}],
    }
    timeline = [
        {"t": 2.0, "event": "read", "method": "textDocument/didChange", "version": 1},
        {"t": 3.0, "event": "started", "version": 1, "thread": "a"},
        {"t": 20.0, "event": "finished", "version": 1, "cpu": 15e6, "thread": "a"},
        {"t": 25.0, "event": "written", "result_id": "1:0:9"},
        {"t": 202.0, "event": "read", "method": "textDocument/didChange", "version": 3},
        {"t": 203.0, "event": "started", "version": 3, "thread": "a"},
        {"t": 330.0, "event": "finished", "version": 3, "cpu": 20e6, "thread": "a"},
        {"t": 335.0, "event": "written", "result_id": "3:0:7"},
    ]
    record["server_timeline"] = key_timeline.server_events(record, [dict(e, t=e["t"] * 1e6) for e in timeline])
    stages = [row["stage"] for row in key_timeline.key_stages(record)]
    assert stages == ["fresh", "client debounce", "analysis (waiting for a core)"]
