"""Fuzzing the real server with random documents and random incremental edits, in each position
encoding (UTF-16 as VS Code, UTF-8 as Neovim 0.11 and Helix, UTF-32): after each batch of edits
the server's copy of the text equals the client's (its SHA-256, from trainlint.printDebugInfo),
its diagnostics equal `trainlint check` of the same text (the engine's findings, placed by the
client's own reckoning of LSP positions), and a hover anywhere is answered; at the end the
resolved `source.fixAll.trainlint` edit, applied by the client, gives what the engine's fixes give.

The documents and edits (tests/fuzz_documents.py) hold the characters str.splitlines() breaks at,
CRLF and CR line ends, byte-order marks, tabs, non-BMP text and half-typed code. The short run is
part of `make test`; `TRAINLINT_FUZZ_EXAMPLES=20000` runs 20,000 edit sequences.
"""

from __future__ import annotations

import collections

import pytest
from fuzz_documents import FUZZ_SETTINGS, documents, edits, rarely
from hypothesis import given
from hypothesis import strategies as st
from lsp_pipe import (
    ENCODINGS,
    RawServer,
    apply_edits,
    capabilities_for,
    diagnostics_of,
    position_at,
    shown,
    text_digest,
)

from trainlint.analysis.engine import analyze_source
from trainlint.fixing import apply_fixes, parses

COUNTS: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    started = {}
    try:
        for encoding in ENCODINGS:
            server = started[encoding] = RawServer()
            capabilities = server.initialize(capabilities_for(encoding), options={"settings": {"debounceMs": 0}})
            assert capabilities["positionEncoding"] == encoding
            server.encoding = encoding
        yield folder, started
    finally:
        for server in started.values():
            server.close()
        slowest = max(server.slowest for server in started.values())
        print(f"\nserver fuzz: {dict(COUNTS)}; slowest reply {slowest[0]:.2f} s ({slowest[1]})")


def _expected_fix_all(text: str) -> str | None:
    """The engine's one round of fixes, as fix-all offers them (the analysis reads past a BOM)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    fixed, applied = apply_fixes(body, analyze_source(body, "fuzz.py"))
    if not applied or fixed == body or not parses(fixed):
        return None
    return bom + fixed


def _check_fix_all(server: RawServer, uri: str, text: str, encoding: str) -> None:
    fix = server.fix_all(uri)
    expected = _expected_fix_all(text)
    assert (fix is None) == (expected is None), "fix-all offered where the engine has nothing to fix, or not offered"
    if fix is not None:
        assert apply_edits(text, fix, encoding) == expected, "fix-all, applied by the client, corrupts the text"
        assert fix[0]["range"]["end"] == position_at(text, len(text), encoding)
        COUNTS["fix-alls"] += 1


@FUZZ_SETTINGS
@given(data=st.data(), encoding=st.sampled_from(ENCODINGS), text=documents())
def test_random_edits_keep_the_server_in_step(servers, data, encoding, text):
    folder, started = servers
    server = started[encoding]
    COUNTS["sequences"] += 1
    uri = (folder / f"doc{COUNTS['sequences']}.py").as_uri()
    server.open(uri, text)
    try:
        _check_fix_all(server, uri, text, encoding)
        for version in range(1, data.draw(st.integers(1, 4)) + 1):
            changes = []
            if data.draw(rarely(20)):  # now and then the whole text, as some clients send it
                text = data.draw(documents())
                changes.append({"text": text})
            for _ in range(data.draw(st.integers(1, 5))):
                start, end, new = data.draw(edits(text))
                changes.append({
                    "range": {"start": position_at(text, start, encoding), "end": position_at(text, end, encoding)}, "text": new,
                })
                text = text[:start] + new + text[end:]
                COUNTS["edits"] += 1
            server.change(uri, version, changes)
            assert text_digest(text) in server.debug_info(), "the server's copy of the text differs from the client's"
            expected = diagnostics_of(analyze_source(text, "fuzz.py"), text, encoding)
            assert shown(server.diagnostics(uri)) == expected, "diagnostics differ from `trainlint check` of the text"
            line = data.draw(st.integers(0, text.count("\n") + text.count("\r") + 1))
            server.result("textDocument/hover", {
                "textDocument": {"uri": uri}, "position": {"line": line, "character": data.draw(st.integers(0, 120))},
            })
            COUNTS["batches"] += 1
        _check_fix_all(server, uri, text, encoding)
    finally:
        server.close_document(uri)
        assert server.process.poll() is None, "the server died"
