"""One module's analysis: chunks, parses, summary, scopes, and facts aggregated over all of them."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import libcst as cst

from . import dependencies, torchapi
from .chunking import Chunk, first_statement, one_statement, split_statements
from .dependencies import Superseded, count_text_read, note_fact, note_whole_module, note_whole_text, text_reads
from .dispatch import bases_asking
from .edit_reuse import edited_text, kept_inner_flows, only_class, only_function, reads_kept_statements, same_but
from .events import AssignEvent, CallEvent
from .flow import ScopeAnalysis
from .flow_checkpoints import inner_path, retarget, rewind
from .lines import normalize_line_breaks
from .names import last_part
from .parsing import ParsedChunk, UnparsedChunk, common_prefix, common_suffix, definition_name
from .statement_shapes import same_names_calling
from .summary import ChunkFacts, ClassInfo, FunctionInfo, ModuleSummary, exported, self_targets_kept
from .values import Value

# What shows a script runs on a GPU, on a line where no `#` comes before it.
_WORDS = re.compile(r"[^\W\d]\w*")
if TYPE_CHECKING:
    from .workspace import Workspace

T = TypeVar("T")


class ModuleAnalysis:
    """Everything the rules may ask of one module; built once per text.

    Reading anything module-wide (every call, every scope, the whole text) is recorded as such
    (``dependencies``), so that the findings of a rule that did are never kept across an edit.
    """

    def __init__(
        self, text: str, path: str, chunks: list[ParsedChunk] | None = None, *,
        workspace: Workspace | None = None, foreign: bool = False,
    ) -> None:
        """``workspace`` resolves imports of the user's other files; ``foreign`` marks such a file's own
        analysis, whose definitions are then analysed in their module whoever asks.

        Line breaks are read as ``\n`` (``\r\n`` and ``\r`` count as one each, as in Python and LSP):
        lines and columns are the text's own, and no rule has to know the file's line endings."""
        text = normalize_line_breaks(text)
        self._text = text
        self.path = path
        self.workspace = workspace
        if chunks is None:
            # An imported file's top-level definitions are parsed when something asks for them
            # (UnparsedChunk); the rest, and every statement of a file to check, at once.
            chunks = []
            for index, piece in enumerate(split_statements(text)):
                name = definition_name(piece.text) if foreign else None
                chunks.append(UnparsedChunk(piece, index, name) if name else ParsedChunk(piece, index))
        self._chunks = chunks
        self.facts: list[ChunkFacts | None] = [None if isinstance(chunk, UnparsedChunk) else ChunkFacts(chunk) for chunk in chunks]
        # The file its statements name as theirs (``ParsedChunk.origin``): set for a workspace file's
        # analysis, which may also be the one its own check uses (Workspace.checked_analysis).
        self.origin: str | None = path if foreign else None
        self.summary = ModuleSummary(chunks, self.facts, ScopeAnalysis, path, workspace, on_parsed=self._make_home if foreign else None)
        if foreign:
            for chunk, facts in zip(chunks, self.facts):
                chunk.origin = path
                if facts is not None:
                    self._make_home(facts)
        self._scopes: dict[int, list[ScopeAnalysis]] = {}
        self._lines: list[str] | None = None
        self._all_scopes: list[ScopeAnalysis] | None = None
        self._backward_calls: list[CallEvent] | None = None
        self._ddp_wraps: list[CallEvent] | None = None
        self._module_wide: dict[Hashable, object] = {}
        self._module_wide_text: set[Hashable] = set()  # the keys of those computed from the text
        # The analysed program: every statement's tree. Kept by an edit that changes no tree (a key
        # typed on a line that stays broken, blanked in its statement's tree), new for any other.
        self.program = object()
        self._calls_by_function: dict[int, list[CallEvent]] | None = None
        # The class whose methods' flows were kept across an edit of one of them (``_methods_kept``),
        # and its statement: once its scopes are computed, no walk compares with the replaced flows.
        self._kept_walks: tuple[int, ClassInfo] | None = None
        # Statements whose analysis and rule results were carried over from the previous text.
        self.kept: frozenset[int] = frozenset()
        # The class statement edited inside one method whose other methods kept their flows (``_methods_kept``);
        # the one whose scopes may keep their rule results (it, or the function walked on from the edited
        # statement, ``resumed_flow``, not one of them), -1 if none; the lines the edit touched (first, last, added).
        self.methods_edited = self.scopes_edited = -1
        self.resumed_flow: ScopeAnalysis | None = None
        self.edited_lines: tuple[int, int, int] | None = None
        self.rule_results: dict[int, dependencies.KeptStatement] = {}
        self.rule_results_key: object = None

    def _make_home(self, facts: ChunkFacts) -> None:
        """An imported file's definitions are analysed in their own module, whoever asks."""
        for info in (*facts.functions.values(), *facts.classes.values()):
            info.home = self.summary
        for class_info in facts.classes.values():
            for method in class_info.methods.values():
                method.home = self.summary

    def updated(self, text: str) -> ModuleAnalysis:
        """The analysis of an edited text.

        Statements whose text did not change are not re-parsed. A statement that also kept its
        index (it may have moved up or down by whole lines) and cannot reach an edited statement
        by any name keeps its flow analysis, and keeps its rules' findings unless they cite a line
        of a statement that moved; the rest is recomputed.

        This moves the statements it keeps to their new lines in place: afterwards only the
        returned analysis may be used, not this one.
        """
        text = normalize_line_breaks(text)
        spliced = self._spliced(text)
        if spliced is not None:
            chunks, unchanged, edited_lines, touched_text = spliced
        else:
            (chunks, unchanged), edited_lines, touched_text = self._rechunked(text), None, ""
        result = self._with_chunks(text, chunks, unchanged, edited_lines, touched_text)
        if "_cuda_found" in self.__dict__:  # a search of 3,900 lines takes 3.7 ms: not again where the text is as it was
            result.__dict__["_cuda_found"] = self._cuda_after_edit(text)
        return result

    def _cuda_after_edit(self, text: str) -> tuple[int, int] | None:
        """``_cuda_found`` of an edited text, from this text's: the lines the edit touched are searched,
        and the rest is as it was."""
        old, found = self._text, self._cuda_found
        prefix = common_prefix(old, text)
        if found is not None and found[1] <= prefix:
            return found  # the text up to it is as it was: still the first
        suffix = common_suffix(old, text, limit=min(len(old), len(text)) - prefix)
        first = text.rfind("\n", 0, prefix) + 1  # where the first line the edit touched starts
        line_end = text.find("\n", len(text) - suffix)
        last = len(text) if line_end < 0 else line_end  # where the last one ends
        in_edit = torchapi.cuda_evidence(text, first, last)
        if in_edit is not None or found is None:
            return in_edit  # none on the lines before the edit's (else found), nor after them (else found)
        shift = len(text) - len(old)
        if found[1] <= last - shift:
            return torchapi.cuda_evidence(text, first)  # it was on a line the edit touched
        lines_added = text.count("\n", prefix, len(text) - suffix) - old.count("\n", prefix, len(old) - suffix)
        return found[0] + lines_added, found[1] + shift  # on a line after the edit, moved with it

    def _spliced(self, text: str) -> tuple[list[ParsedChunk], set[int], tuple[int, int, int], str] | None:
        """An edit inside one statement's lines: that statement alone changes, re-parsing only the
        innermost statement it touched (ParsedChunk.spliced); the others keep their chunks and move
        by the lines the edit added or removed. None for any other edit. With the chunks, the
        first and last line of the new text the edit touched, how many lines it added, and their text."""
        old = self._text
        prefix = common_prefix(old, text)
        suffix = common_suffix(old, text, limit=min(len(old), len(text)) - prefix)
        old_end, new_end = len(old) - suffix, len(text) - suffix
        offset = 0
        for index, chunk in enumerate(self._chunks):
            length = len(chunk.chunk.text)
            if offset <= prefix and old_end <= offset + length and prefix < offset + length:
                piece_text = chunk.chunk.text[: prefix - offset] + text[prefix:new_end] + chunk.chunk.text[old_end - offset:]
                piece = Chunk(start_line=chunk.start_line, text=piece_text)
                replacement = chunk.spliced(piece)
                if replacement is None:
                    return None
                if replacement.broken is not None:
                    if first_statement(text, offset) != piece_text:
                        return None  # the broken lines change where statements begin: split as a fresh analysis does
                    if replacement.module is chunk.module and replacement.broken == chunk.broken:
                        # a key on a line that stays broken: the analysed tree is as it was, and so is
                        # every statement's analysis; only the statement's text and its TL000 change
                        chunk.retyped(replacement)
                        first = text.count("\n", 0, prefix) + 1
                        last = first + text.count("\n", prefix, new_end)
                        return list(self._chunks), set(range(len(self._chunks))), (first, last, 0), edited_text(text, prefix, new_end)
                elif not one_statement(piece_text, prefix - offset):
                    return None  # the edit made a new top-level statement start inside this one
                shift = text.count("\n", prefix, new_end) - old.count("\n", prefix, old_end)
                chunks = list(self._chunks)
                chunks[index] = replacement
                for later in range(index + 1, len(chunks)):
                    moved = chunks[later]
                    moved.relocate(Chunk(start_line=moved.start_line + shift, text=moved.chunk.text))
                first = text.count("\n", 0, prefix) + 1
                edited_lines = (first, first + text.count("\n", prefix, new_end), shift)
                return chunks, set(range(len(chunks))) - {index}, edited_lines, edited_text(text, prefix, new_end)
            offset += length
        return None

    def _rechunked(self, text: str) -> tuple[list[ParsedChunk], set[int]]:
        """The text split into top-level statements again; those whose text is unchanged are kept."""
        previous: dict[str, list[int]] = {}
        for index, chunk in enumerate(self._chunks):
            previous.setdefault(chunk.chunk.text, []).append(index)
        chunks: list[ParsedChunk] = []
        unchanged: set[int] = set()  # same text, same index
        for index, piece in enumerate(split_statements(text)):
            candidates = previous.get(piece.text)
            if not candidates:
                chunks.append(ParsedChunk(piece, index))
                continue
            if index in candidates:
                candidates.remove(index)
                chunk = self._chunks[index]
                if chunk.start_line != piece.start_line:
                    chunk.relocate(piece)
                chunks.append(chunk)
                unchanged.add(index)
            else:
                chunks.append(self._chunks[candidates.pop(0)].moved(piece, index))
        return chunks, unchanged

    def _with_chunks(
        self, text: str, chunks: list[ParsedChunk], unchanged: set[int], edited_lines: tuple[int, int, int] | None,
        touched_text: str,
    ) -> ModuleAnalysis:
        kept, new_facts, tainted = self._reachable_unchanged(chunks, unchanged)
        if not self.imports_unchanged():
            kept = set()  # an imported file changed on disk: what it defines may have changed
        kept_methods: list[FunctionInfo] = []
        edited = resumed = -1
        kept_flows: list[ScopeAnalysis] = []  # of the function edited inside its body: what its walk goes on from
        if edited_lines is not None and len(unchanged) == len(chunks) - 1:
            edited = next(index for index in range(len(chunks)) if index not in unchanged)
            reused = self._methods_kept(chunks, edited, kept, touched_text)
            if reused is None:
                resumed_facts = self._function_resumed(chunks, edited, tainted, touched_text) if tainted is not None else None
                if resumed_facts is not None:
                    resumed = edited
                    new_facts[resumed].release()
                    new_facts[resumed], kept_flows = resumed_facts
                    chunks[resumed] = self._chunks[resumed]  # the statement object the kept flow names, now of the new text
                edited = -1
            else:
                new_facts[edited].release()  # read for its names only: its methods name their class, a cycle
                new_facts[edited], kept_methods = reused
                chunks[edited] = self._chunks[edited]  # the statement object the kept flows name, now of the new text
        result = ModuleAnalysis.__new__(ModuleAnalysis)
        result._text = text
        result.path = self.path
        result.origin = self.origin
        result.workspace = self.workspace
        result._chunks = chunks
        result.facts = [
            self.summary.facts_at(i) if i in kept else new_facts.get(i) or ChunkFacts(chunk) for i, chunk in enumerate(chunks)
        ]
        result.summary = ModuleSummary(chunks, result.facts, ScopeAnalysis, self.path, self.workspace)
        result.summary.resolved = dict(self.summary.resolved) if kept else {}
        result._scopes = {i: self._scopes[i] for i in kept if i in self._scopes}
        result._lines = result._all_scopes = result._backward_calls = result._ddp_wraps = None
        same_program = edited_lines is not None and len(unchanged) == len(chunks) and len(kept) == len(chunks)
        result.program = self.program if same_program else object()
        # values computed from the trees alone are the same program's: those from the text are not
        result._module_wide = {key: value for key, value in self._module_wide.items() if key not in self._module_wide_text} if same_program else {}
        result._module_wide_text = set()
        result._calls_by_function = None
        result._kept_walks = (edited, next(iter(new_facts[edited].classes.values()))) if edited >= 0 else None
        result.kept = frozenset(kept)
        result.methods_edited, result.scopes_edited = edited, max(edited, resumed)
        result.resumed_flow = kept_flows[0] if kept_flows else None
        result.edited_lines = edited_lines if result.scopes_edited >= 0 else None
        result.rule_results = {
            index: results for index, results in self.rule_results.items() if index in kept or index == result.scopes_edited
        }
        result.rule_results_key = self.rule_results_key
        for index, facts in enumerate(self.facts):
            if index not in kept and facts is not None and index != edited and index != resumed:
                facts.release()  # first: through the functions' flows, the functions defined in them
        kept_scopes = {id(method._analysis) for method in kept_methods} | {id(flow) for flow in kept_flows}
        for index, scopes in self._scopes.items():
            for scope in scopes:
                if index not in kept and id(scope) not in kept_scopes:
                    scope.release()
        for flow in [*(method._analysis for method in kept_methods), *kept_flows, *(s for scopes in result._scopes.values() for s in scopes)]:
            if flow.summary is self.summary:  # type: ignore[union-attr]  # what every kept flow reads of the module from now on
                flow.summary = result.summary  # type: ignore[union-attr]
        return result

    def _function_resumed(
        self, chunks: list[ParsedChunk], index: int, tainted: set[str], touched_text: str,
    ) -> tuple[ChunkFacts, list[ScopeAnalysis]] | None:
        """After an edit inside the body of a top-level function (a top-level statement of one
        ``def``), the statement's facts, with the function's flow rewound to before the first
        statement of its body the edit changed (``flow_checkpoints.rewind``), to be walked on from
        there when it is asked for (``FunctionInfo.resume``); and the flows kept: that one, and
        those of the functions defined in it that its walk before that statement walked. None when
        the edit reached further (the function's header, the names parameters' roles are read from, a
        name whose meaning may have changed: ``tainted``, those of ``_reachable_unchanged`` but the
        function's own), and the function is walked afresh.

        The first edit of a function walks it whole, keeping its state before each statement of its
        body (``FunctionInfo.checkpointed``); from the next one on, the statements before the edited
        one are not walked again. The statement object is kept, taking over the edited tree
        (``ParsedChunk.adopt``), so that the kept events and values name the statement as it is now."""
        old_chunk, new_chunk = self._chunks[index], chunks[index]
        if not self.imports_unchanged() or old_chunk.module is None or new_chunk.module is None:
            return None
        old_def, new_def = only_function(old_chunk), only_function(new_chunk)
        if old_def is None or new_def is None or not same_but(old_def, new_def, "body", alike=True):
            return None
        old_block, new_block = old_def.body, new_def.body
        if not isinstance(old_block, cst.IndentedBlock) or not isinstance(new_block, cst.IndentedBlock):
            return None
        if not same_but(old_block, new_block, "body", alike=True):
            return None
        facts = self.summary.facts_at(index)
        info = facts.functions.get(old_def.name.value)
        if len(facts.functions) != 1 or info is None or info.node is not old_def:
            return None
        if not same_names_calling(old_chunk, new_chunk):
            return None  # the names parameters' roles are read from
        old_body, new_body = old_block.body, new_block.body
        shortest = min(len(old_body), len(new_body))
        start = 0
        while start < shortest and old_body[start] is new_body[start]:
            start += 1
        # what the function may use: the words of its text before the edit and of the lines the edit touched
        # (not of the statement it changed, whose text would be generated anew from its tree at each key)
        words = old_chunk.words | frozenset(_WORDS.findall(touched_text))
        if not words.isdisjoint(tainted - facts.defined_names):
            return None  # it uses a name whose meaning may have changed: its walk may read it
        flow = info._analysis
        old_chunk.adopt(new_chunk, words)
        info.node = new_def
        info.checkpointed = True
        # a header parsed again (alike, not the same nodes) is not what the kept parameters' values name
        same_header = same_but(old_def, new_def, "body")
        if flow is None or flow.checkpoints is None or not same_header or start >= len(flow.checkpoints):
            info.release()
            return facts, []
        path, replaced = inner_path(flow, old_body[start], new_body[start], start) if start < len(new_body) else ((start,), {})
        rewind(flow, path)
        retarget(flow, replaced)
        info._analysis, info.resume = None, (flow, path)
        return facts, [flow, *kept_inner_flows(flow)]

    def _methods_kept(
        self, chunks: list[ParsedChunk], index: int, kept: set[int], touched_text: str,
    ) -> tuple[ChunkFacts, list[FunctionInfo]] | None:
        """After an edit inside the body of one method of a class (a top-level statement of one
        ``class``), the class's facts, with the flows of the other methods whose walk read nothing
        that changed kept, and those methods; None when the edit reached further (the class's
        header, its other statements, the method's own header, what ``self.x`` it assigns, the
        names a parameter's role is read from), and every method is walked again.

        A method's walk reads the flows of the functions it asks for (``FunctionInfo.reads``). One
        that asked for a function of another statement analysed again is walked again. The others
        are kept pending: the first time one is asked for, where a fresh analysis would walk it,
        each flow its walk asked for is asked for again, and if one is not what it read then (the
        edited method's return value, say, or what ``__init__`` binds to ``self``), or is being
        walked now when it was not then (recursion: the order of the walks changed), it is walked
        again. The statement object is kept too, taking over the edited tree
        (``ParsedChunk.adopt``), so that the kept flows, their events and values name the
        statement as it is now. An edit of lines that do not parse, whose tree is the one before
        (the lines blanked alike), edits no method: every flow is kept that way."""
        old_chunk, new_chunk = self._chunks[index], chunks[index]
        if not self.imports_unchanged() or old_chunk.module is None or new_chunk.module is None:
            return None
        old_class, new_class = only_class(old_chunk), only_class(new_chunk)
        if old_class is None or new_class is None or not same_but(old_class, new_class, "body"):
            return None
        old_block, new_block = old_class.body, new_class.body
        if not isinstance(old_block, cst.IndentedBlock) or not isinstance(new_block, cst.IndentedBlock):
            return None
        if not same_but(old_block, new_block, "body") or len(old_block.body) != len(new_block.body):
            return None
        changed = [(old, new) for old, new in zip(old_block.body, new_block.body) if old is not new]
        if len(changed) > 1:
            return None
        facts = self.summary.facts_at(index)
        info = facts.classes.get(old_class.name.value)
        if len(facts.classes) != 1 or info is None or info.node is not old_class:
            return None
        # none changed: the edit is on lines that do not parse, blanked in the tree as they were before
        edited: FunctionInfo | None = None
        edited_def: cst.FunctionDef | None = None
        edited_words: frozenset[str] = frozenset()
        if changed:
            old_def, new_def = changed[0]
            if not isinstance(old_def, cst.FunctionDef) or not isinstance(new_def, cst.FunctionDef) or not same_but(
                old_def, new_def, "body", alike=True,
            ):
                return None
            edited = info.methods.get(old_def.name.value)
            if edited is None or edited.node is not old_def:
                return None  # a method defined twice: the class keeps the later one
            if self_targets_kept(old_chunk, old_def) != self_targets_kept(new_chunk, new_def):
                return None  # what `self.x` the method assigns decides what other methods read for it
            # the lines the edit touched hold every word of the method's text that is new (its code
            # generated from the tree at each key: 1 ms in DeepSpeed's class)
            edited_words, edited_def = frozenset(_WORDS.findall(touched_text)), new_def
        if not same_names_calling(old_chunk, new_chunk):
            return None  # the names parameters' roles are read from
        others_changed: set[str] = set()
        for other in range(len(chunks)):
            if other != index and other not in kept:
                others_changed |= self.summary.facts_at(other).defined_names
        # what the class may use: the words of its text before the edit and of the lines the edit touched
        # (a superset, kept for the next edit: all the words of a 3,700-line class take 7 ms to find)
        words = old_chunk.words | edited_words
        if not words.isdisjoint(others_changed):
            return None  # the class uses a name of a statement analysed again: its flows may read it
        kept_chunks = {id(chunks[other]) for other in kept}
        walked_again = {
            method for method in info.methods.values() if not reads_kept_statements(method, info, kept_chunks)
        }
        if edited is not None and edited_def is not None:
            walked_again.add(edited)
            edited.node = edited_def
        old_chunk.adopt(new_chunk, words)
        info.node = new_class
        info.forget_flows(walked_again)
        for method in walked_again:
            method.previous = exported(method._analysis) if method._analysis is not None else ()
            method.release()
        for method in info.methods.values():
            method.pending = method._analysis is not None
        return facts, [method for method in info.methods.values() if method._analysis is not None]

    def _reachable_unchanged(self, chunks: list[ParsedChunk], unchanged: set[int]) -> tuple[set[int], dict[int, ChunkFacts], set[str] | None]:
        """Unchanged statements that reach no changed statement through any name, directly or not; the
        facts of the changed statements, read to tell (the new analysis keeps them); and the names
        whose meaning may have changed (None: any name's, an import changed)."""
        changed_old = [i for i in range(len(self._chunks)) if i not in unchanged]
        changed_new = [i for i in range(len(chunks)) if i not in unchanged]
        new_facts = {i: ChunkFacts(chunks[i]) for i in changed_new}
        if any(self.summary.facts_at(i).imports or self.summary.facts_at(i).stars for i in changed_old) or any(
            facts.imports or facts.stars for facts in new_facts.values()
        ):
            return set(), new_facts, None
        tainted_names: set[str] = set()
        for i in changed_old:
            tainted_names |= self.summary.facts_at(i).defined_names
        for facts in new_facts.values():
            tainted_names |= facts.defined_names
        clean = set(unchanged) - bases_asking(self.summary, unchanged, changed_old, new_facts, tainted_names)
        grew = True
        while grew:
            grew = False
            for index in list(clean):
                if chunks[index].refers_to_any(tainted_names):
                    clean.discard(index)
                    defined = _definitions_reaching(self.summary.facts_at(index), chunks[index], tainted_names)
                    if not defined <= tainted_names:
                        tainted_names |= defined
                        grew = True
        return clean, new_facts, tainted_names

    def imports_unchanged(self) -> bool:
        """Whether every workspace file this module's imports resolved to is as it was on disk."""
        return self.workspace is None or self.workspace.stamps(self.summary.resolved) == self.summary.resolved

    @property
    def chunks(self) -> list[ParsedChunk]:
        note_whole_module()
        return self._chunks

    @property
    def text(self) -> str:
        note_whole_text()
        return self._text

    @property
    def lines(self) -> list[str]:
        note_whole_text()
        return self._all_lines()

    def _all_lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self._text.split("\n")  # never str.splitlines: see lines.py
        return self._lines

    def line(self, number: int) -> str:
        """The text of one line (1-based); a read of the whole module unless the line is in the statement being checked."""
        reads = dependencies.current()
        if reads is not None:
            chunk = reads.chunk
            relative = number - chunk.start_line
            if not 0 < relative <= chunk.chunk.line_count:
                note_whole_text()
            elif chunk.broken is not None and chunk.broken[0] <= relative <= chunk.broken[1]:
                note_whole_text()  # a broken line's text is not in the tree: a key typed on it keeps the tree
            elif reads.scope is not None:
                dependencies.note_position(chunk, number, number)
        return self._all_lines()[number - 1]

    def scopes_of(self, chunk: ParsedChunk) -> list[ScopeAnalysis]:
        """The module-level code of a statement, and every function and method it defines."""
        reads = dependencies.current()
        if reads is not None and (reads.chunk is not chunk or reads.scope is not None):
            note_whole_module()  # checking one scope, all of its statement's is beyond it
        return self._scopes_at(chunk.index)

    def _scopes_at(self, index: int) -> list[ScopeAnalysis]:
        scopes = self._scopes.get(index)
        if scopes is None:
            scopes = self._scopes[index] = self._compute_scopes(index)
        return scopes

    def _compute_scopes(self, index: int) -> list[ScopeAnalysis]:
        scopes = self._scopes_walked(index)
        if self._kept_walks is not None and self._kept_walks[0] == index:
            for method in self._kept_walks[1].methods.values():
                method.previous = None  # every method has been asked for: let go of the replaced flows' values
            self._kept_walks = None
        return scopes

    def _scopes_walked(self, index: int) -> list[ScopeAnalysis]:
        chunk, facts = self._chunks[index], self.summary.facts_at(index)
        scopes: list[ScopeAnalysis] = []
        if chunk.module is not None:
            if any(not isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in chunk.body):
                scopes.append(ScopeAnalysis.of_module_statement(chunk, self.summary))
            for info in facts.functions.values():
                analysis = info.analysis(self.summary)
                if analysis is not None:
                    scopes.append(analysis)
                    scopes.extend(_nested_scopes(analysis, self.summary))
            for class_info in facts.classes.values():
                for method in class_info.methods.values():
                    analysis = method.analysis(self.summary)
                    if analysis is not None:
                        scopes.append(analysis)
        return scopes

    def prepare_scopes(self, superseded: Callable[[], bool] | None = None) -> None:
        """Analyse every statement's scopes in file order, as a fresh analysis does.

        Flow analysis of mutually recursive functions depends on which is analysed first, so
        the order is fixed here rather than left to whichever rule asks first. ``superseded`` is
        asked before each statement not yet analysed; a yes raises :class:`Superseded`, and the
        next call goes on from that statement, in the same order.
        """
        for index in range(len(self._chunks)):
            if superseded is not None and index not in self._scopes and superseded():
                raise Superseded
            try:
                self._scopes_at(index)
            except RecursionError:
                continue  # reported for that statement when its rules run

    def scopes_from(self, scope: ScopeAnalysis) -> list[ScopeAnalysis]:
        """``scope`` and, for module-level code, the module-level code of every later statement."""
        if scope.function is not None:
            return [scope]
        note_whole_module()
        later = [
            other
            for index in range(scope.chunk.index + 1, len(self._chunks))
            for other in self._scopes_at(index)
            if other.function is None
        ]
        return [scope, *later]

    @property
    def all_scopes(self) -> list[ScopeAnalysis]:
        note_whole_module()
        return self._all_scopes_unrecorded()

    def _all_scopes_unrecorded(self) -> list[ScopeAnalysis]:
        if self._all_scopes is None:
            self._all_scopes = [scope for index in range(len(self._chunks)) for scope in self._scopes_at(index)]
        return self._all_scopes

    def all_calls(self):
        note_whole_module()
        return self._all_calls_unrecorded()

    def _all_calls_unrecorded(self):
        for scope in self._all_scopes_unrecorded():
            yield from scope.calls()

    def calls_of(self, function: FunctionInfo) -> list[CallEvent]:
        """Every call the analysis resolved to this local function, in statement order (a read of
        these calls only: ``dependencies.note_calls``)."""
        calls = self._calls_of_unrecorded(function)
        dependencies.note_calls(function, calls)
        return calls

    def _calls_of_unrecorded(self, function: FunctionInfo) -> list[CallEvent]:
        if self._calls_by_function is None:
            index: dict[int, list[CallEvent]] = {}
            for call in self._all_calls_unrecorded():
                if call.function is not None:
                    index.setdefault(id(call.function), []).append(call)
            self._calls_by_function = index
        return self._calls_by_function.get(id(function), [])

    def arguments_for(self, function: FunctionInfo, parameter: str) -> list[tuple[CallEvent, Value]] | None:
        """What each call of a local function in this module passes for one of its parameters.

        None when a call hides it (``*args``, ``**kwargs``) or leaves it at its default.
        """
        return _passed_for(self.calls_of(function), function.positional_parameters, parameter)

    def constructor_arguments(self, owner, attribute: str) -> list[tuple[CallEvent, Value]] | None:
        """For ``self.<attribute>`` that ``__init__`` binds straight from one of its parameters, what each
        construction of the class in this module passes for that parameter (``Trainer(model, loader)``);
        None when ``__init__`` binds it otherwise or a construction hides the argument."""
        init = owner.methods.get("__init__")
        analysis = init.analysis(self.summary) if init is not None else None
        if init is None or analysis is None:
            return None
        bound = [event for event in analysis.events if isinstance(event, AssignEvent) and event.targets == (attribute,)]
        if len(bound) != 1 or not isinstance(bound[0].value_node, cst.Name) or bound[0].value_node.value not in analysis.params:
            return None
        params = init.node.params
        positional = [param.name.value for param in (*params.posonly_params, *params.params)][1:]
        constructions = [
            call for call in self.all_calls() if call.callee is not None and self.summary.local_class(call.callee) is owner
        ]
        return _passed_for(constructions, positional, bound[0].value_node.value) or None

    # ------------------------------------------------------------------ module-wide facts
    @cached_property
    def _cuda_found(self) -> tuple[int, int] | None:
        """The first line showing CUDA, and where the text showing it ends."""
        return torchapi.cuda_evidence(self._text)

    @cached_property
    def _cuda_line(self) -> int | None:
        found = self._cuda_found
        return found[0] if found is not None else None

    @property
    def cuda_line(self) -> int | None:
        """First line showing the script runs on a GPU."""
        count_text_read()  # searched in the text: a module-wide value computed with it is the text's
        note_fact("cuda_line", (_cuda_line, self._cuda_line))
        return self._cuda_line

    @cached_property
    def _cuda_line_text(self) -> str:
        return self._all_lines()[self._cuda_line - 1] if self._cuda_line is not None else ""

    @property
    def cuda_line_text(self) -> str:
        """The text of ``cuda_line`` ("" when there is none)."""
        note_fact("cuda_line_text", (_cuda_line_text, self._cuda_line_text))
        return self._cuda_line_text

    @cached_property
    def _first_backward_line(self) -> int | None:
        calls = self._backward_calls_unrecorded()
        return calls[0].chunk.line_of(calls[0].node) if calls else None

    @property
    def first_backward_line(self) -> int | None:
        """The line of the first backward call the analysis found (in statement order)."""
        note_fact("first_backward_line", (_first_backward_line, self._first_backward_line))
        return self._first_backward_line

    def module_wide(self, key: str, compute: Callable[[ModuleAnalysis], T]) -> T:
        """A value a rule computes once from the whole module and reuses for every statement.

        Every read counts as a module-wide read, even when the value is already computed.
        """
        note_whole_module()
        value = self._module_wide_unrecorded(key, compute)
        if key in self._module_wide_text:
            note_whole_text()  # computed from the text: so is what this reader makes of it
        return value

    def module_fact(self, key: Hashable, compute: Callable[[ModuleAnalysis], T]) -> T:
        """A small module-wide value (a line, a count, an index) that a rule's findings depend on.

        Recorded with its value rather than as a module-wide read: findings computed with it are
        kept after an edit that leaves it equal. ``compute`` must be a module-level function.
        """
        if key not in self._module_wide:
            with dependencies.unrecorded():  # what computing it reads is what the value stands for
                self._module_wide[key] = compute(self)
        value = self._module_wide[key]
        note_fact(key, (compute, value))
        return value  # type: ignore[return-value]

    def calls_indexed(self, key: str, compute: Callable[[ModuleAnalysis], dict[Any, list[CallEvent]]], entry: object) -> list[CallEvent]:
        """One entry of a module-wide index of calls (``compute``, a module-level function, makes it once
        per file), read as the calls it holds (``dependencies.note_calls``), not as the whole module."""
        calls = self.calls_read((key, compute, entry))
        dependencies.note_calls((key, compute, entry), calls)
        return calls

    def _module_wide_unrecorded(self, key: Hashable, compute: Callable[[ModuleAnalysis], T]) -> T:
        if key not in self._module_wide:
            before = text_reads()
            self._module_wide[key] = compute(self)
            if text_reads() != before:
                self._module_wide_text.add(key)
        return self._module_wide[key]  # type: ignore[return-value]

    def still_holds(self, kept: dependencies.KeptResult | dependencies.KeptStatement | dependencies.ScopeResult) -> bool:
        """Whether the module-wide values and the lines a kept result was computed with are unchanged,
        and, for one that read the module's trees beyond its statement, the program (``program``)."""
        if getattr(kept, "program", None) is not None and kept.program is not self.program:  # type: ignore[union-attr]
            return False
        for chunk, start_line, revision in kept.placed:
            if (
                chunk.start_line != start_line or chunk.revision != revision
                or chunk.index >= len(self._chunks) or self._chunks[chunk.index] is not chunk
            ):
                return False
        for name, (compute, value) in kept.facts.items():
            if self._module_wide_unrecorded(name, compute) != value:
                return False
        for key, calls in kept.calls:
            if not dependencies.same_calls(self.calls_read(key), calls, self.kept, self.methods_edited):
                return False
        return True

    def scope_result_holds(self, result: dependencies.ScopeResult, none_needed: Callable | None) -> dependencies.ScopeResult | None:
        """One scope's kept result (of the statement ``scopes_edited``, whose scope it is and still the
        same flow) if it holds, else None: the module-wide values and other statements' lines it read
        are unchanged, every flow it asked for is the same (or holds none of what its rule needs,
        ``dependencies.flows_hold``), and the lines of its statement it read are neither lines the edit
        touched nor after them when the edit added or removed lines."""
        kept = dependencies.flows_hold(result, self.resumed_flow, none_needed) if self.still_holds(result) else None
        if kept is None or not kept.own_lines or self.edited_lines is None:
            return kept
        first_edited, last_edited, added = self.edited_lines
        if added:
            return kept if all(last_read < first_edited for _, last_read in kept.own_lines) else None
        return kept if all(last_read < first_edited or first_read > last_edited for first_read, last_read in kept.own_lines) else None

    def calls_read(self, key: object) -> list[CallEvent]:
        """The module-wide list of calls a kept result read (``dependencies.note_calls``), as it is now."""
        if isinstance(key, str):  # "backward_calls"
            return self._backward_calls_unrecorded()
        if isinstance(key, tuple):  # an entry of an index (``calls_indexed``): what reading the index reads is not the reader's
            with dependencies.unrecorded():
                return self._module_wide_unrecorded(key[0], key[1]).get(key[2], [])
        return self._calls_of_unrecorded(key)  # type: ignore[arg-type]

    @property
    def backward_calls(self) -> list[CallEvent]:
        calls = self._backward_calls_unrecorded()
        dependencies.note_calls("backward_calls", calls)
        return calls

    def _backward_calls_unrecorded(self) -> list[CallEvent]:
        if self._backward_calls is None:
            self._backward_calls = [call for call in self._all_calls_unrecorded() if call.method == "backward" or (
                call.method is None and call.callee and last_part(call.callee) == "backward" and torchapi.is_torch_name(call.callee)
            )]
        return self._backward_calls

    @property
    def ddp_wraps(self) -> list[CallEvent]:
        note_whole_module()
        if self._ddp_wraps is None:
            self._ddp_wraps = [call for call in self.all_calls() if call.callee and torchapi.is_ddp_wrapper(call.callee)] + [
                call for call in self.all_calls() if call.callee == "deepspeed.initialize"
            ]
        return self._ddp_wraps

    @cached_property
    def uses_lightning(self) -> bool:
        """Lightning's Trainer runs this file's training: it imports Lightning for more than Fabric,
        which leaves the loop (and clearing, scaling, accumulating) to the code it accelerates."""
        targets = [
            (alias, target) for alias, target in self.summary.imports.items()
            if target.split(".", 1)[0] in {"lightning", "pytorch_lightning", "lightning_fabric"}
        ]
        if not targets:
            return False
        analysed = "".join(chunk.tree_text() for chunk in self._chunks)  # broken lines, blanked in the trees, are not code
        return not all(_fabric_only(alias, target, analysed) for alias, target in targets)

    # What ModuleView promises a rule are properties, which a cached_property is not to a type
    # checker: each of these is computed once, in its cached `_` twin.
    @cached_property
    def _uses_hf_trainer(self) -> bool:
        return any(
            target.startswith(("transformers.", "trl.", "setfit.", "sentence_transformers."))
            and last_part(target).endswith("Trainer")
            for target in self.summary.imports.values()
        )

    @property
    def uses_hf_trainer(self) -> bool:
        return self._uses_hf_trainer

    @cached_property
    def _uses_accelerate(self) -> bool:
        return self.summary.uses_module("accelerate")

    @property
    def uses_accelerate(self) -> bool:
        return self._uses_accelerate

    @cached_property
    def _uses_deepspeed(self) -> bool:
        return self.summary.uses_module("deepspeed")

    @property
    def uses_deepspeed(self) -> bool:
        return self._uses_deepspeed

    @cached_property
    def another_framework(self) -> str | None:
        """The other deep-learning framework this file is written for: it imports one and nothing of
        torch's but TensorBoard's writer (YOLOX's MegEngine demo, cleanrl's JAX scripts), so its
        `model(x)` records no torch graph. None for PyTorch code."""
        targets = [target for target in self.summary.imports.values() if not target.startswith(_LOGGING_ONLY)]
        imported = {target.split(".", 1)[0] for target in targets}
        if any(name.startswith("torch") for name in imported) or imported & {"lightning", "pytorch_lightning"}:
            return None
        return next((framework for framework in _OTHER_FRAMEWORKS if framework in imported), None)

    @cached_property
    def _framework_runs_loop(self) -> str | None:
        if self.uses_lightning:
            return "PyTorch Lightning"
        if self.uses_hf_trainer:
            return "the Hugging Face Trainer"
        return None

    @property
    def framework_runs_loop(self) -> str | None:
        """A framework that owns the training loop (and zeroing, scaling, sampling), if any."""
        return self._framework_runs_loop


# Deep-learning frameworks other than PyTorch, as their top-level modules are named.
_OTHER_FRAMEWORKS = ("megengine", "tensorflow", "jax", "flax", "paddle", "mindspore", "oneflow", "mxnet", "keras", "haiku")
# torch imported only to log (cleanrl's JAX scripts write TensorBoard through torch's SummaryWriter).
_LOGGING_ONLY = "torch.utils.tensorboard"


def _fabric_only(alias: str, target: str, text: str) -> bool:
    """An import of Lightning that serves Fabric alone: `from lightning.fabric import Fabric`, or
    `import lightning as L` whose every use is `L.Fabric`, `L.fabric...` or `L.seed_everything`."""
    if target.startswith(("lightning.fabric", "lightning_fabric")) or target in {"lightning.Fabric", "lightning.seed_everything"}:
        return True
    if target not in {"lightning", "pytorch_lightning"}:
        return False
    used = set(re.findall(rf"(?<![\w.]){re.escape(alias)}\.(\w+)", text))
    return bool(used) and used <= {"Fabric", "fabric", "seed_everything"}


def _definitions_reaching(facts: ChunkFacts, chunk: ParsedChunk, tainted: set[str]) -> set[str]:
    """The names a statement that reaches ``tainted`` defines whose meaning may change with them: its
    functions and classes (their bodies use them), and the bindings whose value expressions do
    (``args = parse_args()`` beside a call of an edited ``main`` keeps its value)."""
    names = set(facts.functions) | set(facts.classes)
    for name, expression, _ in facts.bindings:
        if name not in names and not tainted.isdisjoint(_WORDS.findall(chunk.code_for(expression))):
            names.add(name)
    return names


def _cuda_line(module: ModuleAnalysis) -> int | None:
    count_text_read()  # a search of the text: kept only while the text is, not while the trees are
    return module._cuda_line


def _cuda_line_text(module: ModuleAnalysis) -> str:
    count_text_read()
    return module._cuda_line_text


def _first_backward_line(module: ModuleAnalysis) -> int | None:
    return module._first_backward_line


def _nested_scopes(analysis: ScopeAnalysis, summary: ModuleSummary) -> list[ScopeAnalysis]:
    nested: list[ScopeAnalysis] = []
    for info in analysis.local_functions.values():
        inner = info.analysis(summary)
        if inner is not None:
            nested.append(inner)
            nested.extend(_nested_scopes(inner, summary))
    return nested


def _passed_for(calls: list[CallEvent], positional: list[str], parameter: str) -> list[tuple[CallEvent, Value]] | None:
    """What each call passes for ``parameter`` (by keyword or by position in ``positional``); None
    when a call hides it (``*args``, ``**kwargs``) or leaves it at its default."""
    passed: list[tuple[CallEvent, Value]] = []
    for call in calls:
        if any(arg.star for arg in call.arg_nodes):
            return None
        if parameter in call.kwargs:
            passed.append((call, call.kwargs[parameter]))
        elif parameter in positional and positional.index(parameter) < len(call.args):
            passed.append((call, call.args[positional.index(parameter)]))
        else:
            return None
    return passed
