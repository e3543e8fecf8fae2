"""A document's first report when it is opened again: the findings an earlier analysis gave for
the same text, published at once while the document's own analysis runs (docs/server.md, "Start-up").

A fresh server first imports the analysis (LibCST, the rules) and then analyses the whole file,
about a second of CPU for a 3,800-line file, before it can say anything. Most files an editor opens
are files it opened before, unchanged since. So each analysis of a document whose text is its
file's on disk (as it was opened or saved) is remembered in the user's cache folder (never the
workspace): ``$TRAINLINT_CACHE_DIR/reports``, else ``~/.cache/trainlint/reports``, kept and pruned
as the command line's results cache is (``trainlint/cache.py``: entries unused for 30 days go, and
the results of all but the last few installations), in a folder named by trainlint's version and
installation. An entry is found by a key that hashes everything the findings depend on that is
known before analysing: the text, the file's path, the workspace folders imports are looked up in,
and the settings; and it records everything the analysis read of the workspace: each module an
import looked for and the file it found, and each file reached with its modification time and
size. An entry whose lookups find another file now, or whose files changed, is not used.

The remembered report is the document's last finished analysis until its own is done
(``Analysis.remembered``): pulls and publishes answer from it at once, the analysis of the text
starts as for any document, and the client is given its report when it is done (a re-pull where the
client can be asked, else a new publish). Served before the rules are imported, its diagnostics
carry no link to the rule's page (``diagnostics.help_uri``). Not remembered, because an entry could
not tell when its findings would change: a document with no file (an unsaved buffer), settings with
a target GPU (the VRAM estimate reads model configurations, the Hugging Face cache among them, that
no entry records) or with local plugins (the project's own code, which may read anything), and the
rules' strict mode. One dependency no entry records is shared with the command line's cache: a
workspace file that starts calling a function of the document (``analysis/callers.py``) is seen by
the fresh analysis, not by the remembered report.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from trainlint.analysis.engine_codes import STRICT_ENV
from trainlint.analysis.files import (
    MAX_SOURCE_BYTES,
    UnreadableFile,
    make_user_cache_part,
    read_bounded,
    user_cache_folder,
)
from trainlint.analysis.findings import Finding
from trainlint.analysis.workspace import Workspace
from trainlint.cache import CacheUnavailable, ResultCache
from trainlint.settings import EffectiveSettings

from .documents import Analysis, DocumentState

if TYPE_CHECKING:
    from .language_server import TrainlintServer

log = logging.getLogger("trainlint.server")

FOLDER_NAME = "reports"  # in the user's cache folder
_FORMAT = b"server reports 1"  # in every key: the server's entries never answer the command line's keys


class RememberedReports:
    """The folder of remembered reports, opened on first use."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder  # None: the user has no cache folder
        self._opened: ResultCache | None = None
        self._unavailable = folder is None
        self._lock = threading.Lock()
        self._pruned = False  # pruned once per process (at most once a day, ``ResultCache.prune``)

    @classmethod
    def in_user_cache(cls) -> RememberedReports:
        folder = user_cache_folder()
        return cls(Path(folder) / FOLDER_NAME if folder else None)

    def recall(self, path: Path, workspace: Workspace, text: str, settings: EffectiveSettings) -> list[Finding] | None:
        """The findings remembered for ``text`` at ``path`` under ``settings``, when everything the
        analysis read of the workspace is as it was; None when there are none to trust."""
        key = _key(path, workspace, text, settings)
        cache = self._cache() if key is not None else None
        if cache is None or key is None:
            return None
        return cache.load(key, workspace, str(path))

    def remember(self, path: Path, workspace: Workspace, text: str, settings: EffectiveSettings,
                 findings: list[Finding]) -> None:
        """Keep the findings of the analysis of ``text`` that has just finished, with what it read of
        the workspace (asked on the thread that ran it, before another analysis can read more)."""
        key = _key(path, workspace, text, settings)
        cache = self._cache() if key is not None else None
        if cache is not None and key is not None:
            cache.store(key, findings, workspace, str(path))
            if not self._pruned:  # here, on an analysis thread, not at the didOpen that opened the folder
                self._pruned = True
                cache.prune()

    def _cache(self) -> ResultCache | None:
        """The folder, each time seen afresh: a ``ResultCache`` keeps the stamps it read for one run
        of the command line, and the server's files change while it runs."""
        with self._lock:
            if self._opened is None and not self._unavailable:
                assert self._folder is not None
                try:
                    make_user_cache_part(self._folder)
                    self._opened = ResultCache.open(self._folder)
                except CacheUnavailable as error:
                    log.warning("reports are not remembered: %s", error)
                    self._unavailable = True
                except OSError as error:
                    log.warning("reports are not remembered: cannot write %s: %s", self._folder, error.strerror or error)
                    self._unavailable = True
            opened = self._opened
        return ResultCache(opened.folder, opened.entries.name) if opened is not None else None


def _key(path: Path, workspace: Workspace, text: str, settings: EffectiveSettings) -> str | None:
    """The entry for ``text``; None where an entry could not tell when its findings change."""
    analysis = settings.analysis
    if analysis.target_gpu or analysis.plugins or os.environ.get(STRICT_ENV):
        return None
    paths = [os.fsencode(path), *(os.fsencode(root) for root in workspace.roots)]
    fingerprint = msgspec.msgpack.encode([_FORMAT, paths, settings])
    return ResultCache.key(fingerprint, text.encode("utf-8", "surrogatepass"))


def first_report(ls: TrainlintServer, uri: str, state: DocumentState) -> None:
    """At ``didOpen``: the remembered report of the document's text, as its last finished analysis."""
    current = ls.current_text(uri)
    if current is None or state.path is None or state.workspace is None or state.latest is not None:
        return
    text, version = current
    settings = ls.settings_for(state)
    findings = ls.remembered.recall(state.path, state.workspace, text, settings)
    if findings is not None:
        state.latest = Analysis(version, settings, text, findings, changes=ls.changes_of(uri, version), remembered=True)
        state.first_remembered = True


def remember_analysis(ls: TrainlintServer, uri: str, state: DocumentState, analysis: Analysis) -> None:
    """After an analysis, on its thread: keep its findings when its text is the file's on disk (as
    opened or saved), the text a later session will open."""
    if (
        analysis.remembered or analysis.carried_from is not None or state.path is None or state.workspace is None
        or analysis.text != ls.saved_text.get(uri) or not _on_disk(state.path, analysis.text)
    ):
        return
    try:
        ls.remembered.remember(state.path, state.workspace, analysis.text, analysis.settings, analysis.findings)
    except Exception:  # a bug of ours: the next start is only slower
        log.exception("remembering the report of %s failed", uri)


def _on_disk(path: Path, text: str) -> bool:
    try:
        return read_bounded(path, MAX_SOURCE_BYTES) == text.encode("utf-8", "surrogatepass")
    except UnreadableFile:
        return False
