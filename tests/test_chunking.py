from hypothesis import given, settings
from hypothesis import strategies as st

from trainlint.analysis.chunking import (
    UNTERMINATED_STRING,
    check_syntax,
    first_statement,
    one_statement,
    split_statements,
    unterminated_string_kept,
)
from trainlint.analysis.engine import analyze_source


def starts(text):
    return [chunk.start_line for chunk in split_statements(text)]


def test_top_level_statements_with_their_comments():
    text = "import os\n\n# the model\n@decorator\ndef f():\n    return (1,\n2)\n\nif x:\n    pass\nelse:\n    pass\n"
    assert starts(text) == [0, 1, 7]  # blank lines and comments go with the statement below them


def test_strings_and_brackets_do_not_split():
    text = 'x = """\ndef not_a_def():\n"""\ny = [\n1,\n]\nz = 1 \\\n+ 2\n'
    assert starts(text) == [0, 3, 6]


def test_unclosed_bracket_is_closed_by_the_next_definition():
    # the blank line above goes with the definition, as blank lines do between whole statements
    text = "x = foo(1,\n\ndef g():\n    pass\n"
    assert starts(text) == [0, 1]


def test_a_bracket_left_open_inside_a_function_stops_at_the_next_top_level_code():
    text = "def f():\n    running.append(\n    x = 1\n\n\nif __name__ == '__main__':\n    f()\n"
    assert starts(text) == [0, 3]
    assert starts("x = (1,\n2)\ny = 3\n") == [0, 2], "at top level a continuation at column 0 stays one statement"


def test_a_bracket_open_to_the_end_of_the_text_splits_without_compiling_the_statement(monkeypatch):
    # a call half typed in a long `main()` followed by the `__main__` block: Python refuses any text that
    # ends with a bracket open, so the statement is not compiled to learn that the line goes on from it
    from trainlint.analysis import chunking

    compiled = []
    monkeypatch.setattr(chunking, "check_syntax", compiled.append)
    body = "".join(f"    step_{index} = train(step_{index - 1})\n" for index in range(1, 200))
    text = f"def main():\n{body}    print(f'loss={{loss}}'\n\n\nif __name__ == '__main__':\n    main()\n"
    assert starts(text) == [0, 201]
    assert compiled == []
    closed = text.replace("if __name__", "loss)\nif __name__")  # closed by a line at column 0: Python decides
    assert starts(closed) == [0, 204]
    assert len(compiled) == 1


def test_a_continuation_line_at_column_0_inside_brackets_is_not_split_when_the_code_is_valid():
    # legal Python, found by the server fuzzer: splitting it reported two false syntax errors
    text = "class MLP:\n    def forward(self, x):\n        return self.net(\nx).squeeze(-1)\n\n\nloss = 1\n"
    assert [chunk.text for chunk in split_statements(text)] == [
        "class MLP:\n    def forward(self, x):\n        return self.net(\nx).squeeze(-1)\n", "\n\nloss = 1\n",
    ]
    assert "TL000" not in {finding.code for finding in analyze_source(text, "train.py")}


def test_a_form_feed_before_a_line_is_not_code_at_column_0():
    # Python resets its indentation count at a form feed: `\f@deco` is a decorator at column 0 and
    # belongs with the `\fdef` under it, `\f    x` is indented, `\felse:` continues the `if`.
    text = "import torch\n\n\f@deco\n\fdef f():\n    pass\n\f    return 1\nif x:\n    a\n\felse:\n    b\n"
    assert [chunk.text for chunk in split_statements(text)] == [
        "import torch\n", "\n\f@deco\n\fdef f():\n    pass\n\f    return 1\n", "if x:\n    a\n\felse:\n    b\n",
    ]
    assert "TL000" not in {finding.code for finding in analyze_source(text, "train.py")}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab (){}[]'\"#\\\n\t:=@defclass", max_size=300))
def test_chunks_always_reassemble_the_text(text):
    assert "".join(chunk.text for chunk in split_statements(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab (){}[]'\"#\\\n\t:=@defclass", max_size=300), st.integers(min_value=0, max_value=300))
def test_the_first_statement_alone_is_the_first_chunk_of_the_whole_split(text, start):
    """An edit reads only the statement it touched; that must be where a split of the text from
    there would end it (half-typed brackets and strings included)."""
    start = min(start, len(text))
    rest = split_statements(text[start:])
    assert first_statement(text, start) == (rest[0].text if rest else "")


DEFINITIONS = [
    "class Trainer:\n    def step(self, batch):\n        x, y = batch\n        return self.model(x, y)\n",
    "\n# the loop\n@torch.no_grad()\ndef main(args):\n    for x in loader:\n        total += model(x)\n    return total\n",
    "\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return self.fc(x)\n\n    # ends here\n",
    # parameters one a line, as formatters write a long signature: the closing bracket at column 0
    "def initialize(\n    tensor_parallel: int = 1,\n    order: str = \"tp-(dp\",\n    name: str = 'a#b',\n) -> None:\n    world = get_world_size()\n"
    "    for rank in range(world):\n        groups.append(new_group([rank]))\n",
    "@dataclass(frozen=True)\nclass Config(\n    Base,\n    metaclass=Meta,\n):\n    width: int = 8\n\n    def size(self):\n        return [self.width]\n",
]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(DEFINITIONS), st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=8),
    st.text(alphabet="ab (){}[]'\"#\\\n\t\f:=@defclass", max_size=12),
)
def test_one_statement_says_what_the_split_says_after_an_edit_inside_a_definition(definition, at, removed, typed):
    # the shortcut a key typed inside a long class or function takes: it must never disagree with the split
    assert len(split_statements(definition)) == 1
    at = min(at, len(definition))
    text = definition[:at] + typed + definition[at + removed:]
    assert one_statement(text, at) == (len(split_statements(text)) == 1)



@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(DEFINITIONS), st.text(alphabet="ab (){}[]'\"#\\\n\t:=@defclass", max_size=60),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=260), st.integers(min_value=0, max_value=4),
                  st.text(alphabet="ab (){}[]'\"#\\\n\t:=@defclass", max_size=6)),
        min_size=2, max_size=8,
    ),
)
def test_the_first_statement_going_on_from_the_scan_before_ends_where_the_split_does(definition, after, edits):
    """Keys typed one after another in a definition with more code after it: each scan goes on from the
    last line the scan before reached with no bracket open and the same text before it; what it finds
    must be what a split of the whole text finds, brackets and strings left open included."""
    text = definition + after
    for at, removed, typed in edits:
        at = min(at, len(text))
        text = text[:at] + typed + text[at + removed:]
        rest = split_statements(text)
        assert first_statement(text) == (rest[0].text if rest else "")


def test_a_scan_goes_on_from_no_line_decided_by_the_text_after_it():
    """A line at column 0 inside a bracket opened on an indented line is a continuation while the
    statement compiles with it (``X())])``), which depends on the lines after it: once the method
    below stops compiling, the line after the blank one above ``X`` starts a statement, though the
    text up to the edit is as it was."""
    valid = "class A:\n    def f(self):\n        model = M(layers=[L(\n\nX())])\n        return model\n\n    def g(self):\n        return 1\n"
    broken = valid.replace("    def g(self):", "    de[f g(self):")
    for text in (valid, broken, valid):
        assert first_statement(text) == split_statements(text)[0].text
    assert split_statements(broken)[0].text != broken


TRAINER = (
    "class Trainer:\n    def step(self, batch):\n        x, y = batch\n        loss = self.model(x, y)\n\n"
    "        # the update\n        loss.backward()\n        return loss\n\n"
    "    def evaluate(self, loader):\n        for x in loader:\n            self.model(\n                x)\n        return (1,\n2)\n"
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["", "\n\ndef after():\n    return 1\n", "\n\nif __name__ == '__main__':\n    main()\n", "\n# c\n@deco\nclass B:\n    pass\n"]),
    st.integers(min_value=0, max_value=len(TRAINER)), st.sampled_from(['print(f"step={step} loss={loss.item():.4f}")', "x = f(a, [b, (c", "'''doc\n  ("]),
    st.integers(min_value=0, max_value=3),
)
def test_keys_typed_inside_brackets_left_open_end_the_statement_where_the_split_does(after, at, typed, taken_back):
    """A statement typed a key at a time, its brackets open for most keys: each scan joins the one
    before a line or two after the edit, inside the brackets too, and takes the end that one found;
    taking keys back, and a text after the definition that the scan reads or cuts at, included."""
    text = TRAINER + after
    at = text.rfind("\n", 0, at) + 1  # typed on a line of its own
    text = text[:at] + "\n" + text[at:]
    for count in [*range(1, len(typed) + 1), *range(len(typed) - 1, len(typed) - 1 - taken_back, -1)]:
        edited = text[:at] + typed[:count] + text[at:]
        rest = split_statements(edited)
        assert first_statement(edited) == (rest[0].text if rest else "")


def _compiled_error(text: str) -> tuple | None:
    """What the analysis reads of Python's error for ``text`` (``parsing._problem``), or None when it compiles."""
    try:
        check_syntax(text)
    except SyntaxError as error:
        return error.msg, error.lineno, error.offset
    except ValueError:
        return ("refused",)
    return None


_STRING_CODE = st.sampled_from(["x = ", "print(", "f(a, b=", "    y = g(", "if k in ", "return ", "é = ", "\tz = "])
_LINES_AFTER = st.lists(st.sampled_from(["    a = 1", "    h = '''", "    )", "  i = 2", "    j = 'k'", "    return a", "    n = '\0'"]), max_size=4)
_TYPED = st.text(alphabet="ab {}[]()'\"#\\\n\r\t\0:=é\udc80", max_size=12)


@settings(max_examples=400, deadline=None)
@given(
    before_lines=st.lists(st.sampled_from(["    a = 1", "    for b in c:", "        d(b)", "", "    # note", "    e = (1,"]), max_size=4),
    code=_STRING_CODE,
    prefix=st.sampled_from(["", "f", "r", "b", "rb", "F", "u", "fr"]),
    quote=st.sampled_from(["'", '"']),
    first=_TYPED,
    second=_TYPED,
    after_lines=_LINES_AFTER,
    edited_after=st.one_of(st.none(), _LINES_AFTER),
)
def test_an_unterminated_string_kept_is_the_error_a_compile_gives(
    before_lines, code, prefix, quote, first, second, after_lines, edited_after
):
    """``unterminated_string_kept`` says the edited text fails as the text before did only when
    compiling the edited text says so: a string typed inside a function, key after key."""
    head = "\n".join(["def main():", *before_lines, "    " + code + prefix + quote])
    tail = "".join("\n" + line for line in after_lines)
    edited_tail = tail if edited_after is None else "".join("\n" + line for line in edited_after)
    before, after = head + first + tail, head + second + edited_tail
    error = _compiled_error(before)
    if error is None or len(error) < 3 or error[0] != UNTERMINATED_STRING.format(error[1]):
        return
    if unterminated_string_kept(before, error[1], error[2], after):
        assert _compiled_error(after) == error


def test_an_unterminated_string_is_kept_while_the_key_types_inside_it():
    head = 'def main():\n    for step in range(3):\n        print(f"step={step} '
    before, tail = head + "lo", "\n        x = 1\n    return x\n"
    line, column = 3, 15
    assert _compiled_error(before + tail) == (UNTERMINATED_STRING.format(3), line, column)
    for typed in ("los", "loss={loss:.4f}", "", "a'b", "{{é"):
        assert unterminated_string_kept(before + tail, line, column, head + typed + tail)
        assert _compiled_error(head + typed + tail) == (UNTERMINATED_STRING.format(3), line, column)
    for typed in ('lo"', "lo\\", "lo\nx", "lo\r", "lo\0", "lo\udc80"):  # ends the string, carries it on, or is refused
        assert not unterminated_string_kept(before + tail, line, column, head + typed + tail)
    assert not unterminated_string_kept(before + tail, line, column, head.replace("step", "stop", 1) + "lo" + tail)
    assert not unterminated_string_kept(before + tail, line, column, head + "lo" + tail + "y")
