"""The VS Code extension in a real VS Code, driven as a user drives it.

code-server (the npm package, which bundles VS Code; `tests/vscode/`) serves VS Code on 127.0.0.1 with
a throw-away user-data folder, and the extension's `.vsix` is installed with `--install-extension`.
The workspace holds one of our buggy examples, a `pyproject.toml` and modules planted to shadow what
the server imports (`json.py`, `venv.py`, `libcst.py`, `runpy.py`, `pip.py`, `trainlint/__init__.py`),
each of which would leave a marker file if imported. Debian's Chromium, through selenium and
chromium-driver, then does what a user does: opens the file, waits for the squiggles, hovers the
TL101 squiggle, opens the Problems panel, runs the quick fix from the light bulb, saves, hovers the
model line for the VRAM estimate and reads the status bar. Last it switches the extension from
`trainlint.path` to `trainlint.interpreter` in the Settings editor, which restarts the server as
`python -c <guard> server` in the workspace folder, undoes the fix and waits for the new server's TL101.

The session runs once (the `session` fixture) and records what VS Code showed; the tests assert on
the record. Screenshots of every step go to `build/vscode-e2e/` (with `versions.json` and the logs);
with TRAINLINT_README_IMAGES=1 (`make readme-images`) two of them are copied to `docs/images/`.

`make test` installs everything this needs (code-server and its Node.js from npm, Chromium and
chromium-driver from Debian, selenium from PyPI, the `.vsix` built from `vscode-extension/`); a
missing piece fails the test, it is never skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

try:
    import selenium
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # the fixture fails and says how to install it
    selenium = None

ROOT = Path(__file__).resolve().parents[1]
E2E = ROOT / "tests" / "vscode"
NODE = E2E / "node_modules" / ".bin" / "node"
CODE_SERVER = E2E / "node_modules" / "code-server" / "out" / "node" / "entry.js"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
EXAMPLE = ROOT / "examples" / "buggy" / "lm_finetune.py"
OUTPUT = ROOT / "build" / "vscode-e2e"
README_IMAGES = {"05-quick-fix-menu.png": "vscode-quick-fix.png", "07-vram-hover.png": "vscode-vram-hover.png"}
INSTALL_HINT = "run `make test` (or `make vscode-e2e-deps`), which installs it"

SESSION_BUDGET_S = 150  # every wait of the session shares this; the whole test stays under 3 minutes
STEP_TIMEOUT_S = 60
WINDOW = (1280, 900)
EDITOR_HOVER = ".monaco-editor .monaco-hover"  # the editor's hover widget, not the workbench's tooltips

TL101_LINE = "        total_loss += loss"  # line 76 of the example: TL101 on `loss`, column 23
FIXED_LINE = "        total_loss += loss.detach()"
MODEL_LINE = "    model = AutoModelForCausalLM.from_pretrained(args.model).to(device)"  # line 101
HOSTILE_MODULES = ("json.py", "venv.py", "libcst.py", "runpy.py", "pip.py", "trainlint/__init__.py")
# Where the server comes from: machine-scoped settings, so code-server keeps them as the Remote settings
# (user-data/Machine/settings.json). `trainlint.path` wins; the user clears it later.
MACHINE_SETTINGS = {"trainlint.path": str(Path(sys.executable).parent / "trainlint"), "trainlint.interpreter": sys.executable}
USER_SETTINGS = {
    # a fresh VS Code as a user would keep it: no welcome page, no chat side bar, no trust prompt, no update checks
    "workbench.startupEditor": "none",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.tips.enabled": False,
    # no command centre in the title bar: its tooltip would sit in the screenshots where the mouse rests
    "window.commandCenter": False,
    "chat.disableAIFeatures": True,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    # one row per problem (the tree view adds a row per evidence line), so all of them fit in the panel
    "problems.defaultViewMode": "table",
    # the planted modules stay on disk (the server runs among them) but out of the screenshots
    "files.exclude": {name: True for name in (*HOSTILE_MODULES[:-1], "trainlint", "**/*.imported")},
}

T = TypeVar("T")


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.fail(f"{what} not found at {path}: {INSTALL_HINT}")
    return path


def _vsix() -> Path:
    version = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))["version"]
    vsix = ROOT / "vscode-extension" / f"trainlint-{version}.vsix"
    if not vsix.is_file():
        pytest.fail(f"the extension package {vsix} is missing: run `make vsix` (`make test` builds it)")
    return vsix


def _version(command: list[str], environment: dict[str, str] | None = None) -> str:
    run = subprocess.run(command, capture_output=True, text=True, timeout=30, env=environment, stdin=subprocess.DEVNULL)
    return run.stdout.strip().splitlines()[-1]  # code-server may first log that it wrote its config


def _plant_hostile_modules(workspace: Path) -> None:
    """Each module, if anything imports it, leaves `<module>.imported` next to itself."""
    for name in HOSTILE_MODULES:
        module = workspace / name
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text("open(__file__ + '.imported', 'w').close()\n", encoding="utf-8")


def _imported_modules(workspace: Path) -> list[str]:
    return sorted(str(marker.relative_to(workspace))[: -len(".imported")] for marker in workspace.rglob("*.imported"))


def _servers(workspace: Path) -> list[list[str]]:
    """Command lines of the trainlint servers running in the workspace folder (Linux /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or Path(os.readlink(proc / "cwd")) != workspace:
                continue
            argv = (proc / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")[:-1]
        except OSError:  # gone, or not ours to read
            continue
        if argv[-1:] == ["server"] and argv[0] == sys.executable:
            found.append(argv)
    return found


class Session:
    """A code-server and a Chromium on it. Every wait shares one deadline; a failed one says what it waited for,
    with a screenshot and the ends of code-server's log and of the trainlint output channel."""

    def __init__(self, base: Path, output: Path) -> None:
        self.base = base
        self.output = output
        self.workspace = base / "workspace"
        self.user_data = base / "user-data"
        self.extensions = base / "extensions"
        self.home = base / "home"
        self.deadline = time.monotonic() + SESSION_BUDGET_S
        self.server: subprocess.Popen[bytes] | None = None
        self.driver = None
        self.shots = 0
        self.timings: dict[str, float] = {}
        self._started = time.monotonic()

    # -- set-up -------------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        xdg = {f"XDG_{kind}_HOME": str(self.home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")}
        return {
            **os.environ,
            "HOME": str(self.home),
            **xdg,
            "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            # no extension marketplace: nothing to fetch from outside this machine
            "EXTENSIONS_GALLERY": json.dumps({"serviceUrl": ""}),
        }

    def code_server(self, *args: str) -> list[str]:
        return [str(NODE), str(CODE_SERVER), "--user-data-dir", str(self.user_data), "--extensions-dir", str(self.extensions), *args]

    def prepare(self, vsix: Path) -> None:
        self.workspace.mkdir()
        (self.workspace / "train.py").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
        (self.workspace / "pyproject.toml").write_text(
            '[project]\nname = "lm-finetune"\nversion = "0.1.0"\n\n[tool.trainlint]\ntarget-gpu = "a100-80gb"\n', encoding="utf-8"
        )
        _plant_hostile_modules(self.workspace)
        for scope, settings in (("User", USER_SETTINGS), ("Machine", MACHINE_SETTINGS)):
            (self.user_data / scope).mkdir(parents=True)
            (self.user_data / scope / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
        self.home.mkdir(exist_ok=True)  # `code-server --version` may have written its config there
        install = subprocess.run(
            self.code_server("--install-extension", str(vsix)),
            capture_output=True, text=True, timeout=60, env=self.environment(), cwd=self.base, stdin=subprocess.DEVNULL,
        )
        assert install.returncode == 0 and "successfully installed" in install.stdout, (
            f"code-server --install-extension {vsix} failed ({install.returncode}):\n{install.stdout}\n{install.stderr}"
        )
        self.mark("install the .vsix")

    def machine_settings(self) -> dict:
        return json.loads((self.user_data / "Machine" / "settings.json").read_text(encoding="utf-8"))

    def start(self) -> None:
        """code-server on a free loopback port, started in the workspace as `code-server .` is."""
        log = (self.output / "code-server.log").open("wb")
        self.server = subprocess.Popen(
            self.code_server(
                "--bind-addr", "127.0.0.1:0", "--auth", "none", "--disable-telemetry", "--disable-update-check",
                "--disable-workspace-trust", "--disable-getting-started-override", "--ignore-last-opened", str(self.workspace),
            ),
            cwd=self.workspace, env=self.environment(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its process group: the extension host and the trainlint server end with it
        )
        address = self.until("code-server to listen", lambda: self._listening(), timeout=30)

        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for argument in (
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={WINDOW[0]},{WINDOW[1]}",
            # no connections but to code-server: Chromium's own background traffic is off, and it resolves no host name
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--no-first-run", "--no-default-browser-check", f"--user-data-dir={self.base / 'chromium'}",
        ):
            options.add_argument(argument)
        service = Service(str(CHROMEDRIVER), log_output=str(self.output / "chromedriver.log"), env=self.environment())
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_page_load_timeout(STEP_TIMEOUT_S)
        # --window-size is the outer size, even headless: make the page itself WINDOW big
        chrome = self.driver.execute_script("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]")
        self.driver.set_window_size(WINDOW[0] + chrome[0], WINDOW[1] + chrome[1])
        self.driver.get(f"{address}?folder={self.workspace}")
        self.mark("start code-server and Chromium")

    def _listening(self) -> str | None:
        assert self.server is not None
        if self.server.poll() is not None:
            self.fail(f"code-server exited with {self.server.returncode}")
        match = re.search(r"HTTP server listening on (http://127\.0\.0\.1:\d+/)", self.log("code-server.log"))
        return match.group(1) if match else None

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.quit()
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait(timeout=10)
        for log in self.user_data.glob("logs/*/exthost*/output_logging_*/*trainlint.log"):
            shutil.copy(log, self.output / "trainlint-output.log")

    # -- waiting, failing, recording ----------------------------------------------------------------

    def until(self, what: str, probe: Callable[[], T | None], timeout: float = STEP_TIMEOUT_S) -> T:
        deadline = min(time.monotonic() + timeout, self.deadline)
        while True:
            try:
                value = probe()
            except StaleElementReferenceException:  # VS Code re-rendered the element: look again
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                budget = f"the session's {SESSION_BUDGET_S} s ran out" if deadline == self.deadline else f"timed out after {timeout} s"
                self.fail(f"{budget} waiting for {what}")
            time.sleep(0.2)

    def fail(self, message: str) -> None:
        if self.driver is not None:
            self.shot("failed")
            message += f"\nscreenshot: {self.output / f'{self.shots:02d}-failed.png'}"
        raise AssertionError(
            f"{message}\n--- code-server log (end) ---\n{self.log('code-server.log')[-3000:]}"
            f"\n--- trainlint output channel (end) ---\n{self.trainlint_output()[-3000:]}"
        )

    def log(self, name: str) -> str:
        path = self.output / name
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""

    def trainlint_output(self) -> str:
        logs = sorted(self.user_data.glob("logs/*/exthost*/output_logging_*/*trainlint.log"))
        return "".join(log.read_text(encoding="utf-8", errors="replace") for log in logs)

    def shot(self, name: str) -> Path:
        self.shots += 1
        path = self.output / f"{self.shots:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def mark(self, step: str) -> None:
        now = time.monotonic()
        self.timings[step] = round(now - self._started, 1)
        self._started = now

    # -- what a user does -------------------------------------------------------------------------

    def keys(self, *keys: str, modifiers: tuple[str, ...] = ()) -> None:
        chain = ActionChains(self.driver)
        for modifier in modifiers:
            chain.key_down(modifier)
        chain.send_keys(*keys)
        for modifier in reversed(modifiers):
            chain.key_up(modifier)
        chain.perform()

    def go_to(self, line: int, column: int) -> None:
        """Ctrl+G, `line:column`, Enter."""
        self.keys("g", modifiers=(Keys.CONTROL,))
        self.until("the Go to Line box", lambda: self.visible(".quick-input-widget input"))
        self.keys(f"{line}:{column}", Keys.ENTER)
        self.until(f"the cursor at line {line}", lambda: f"Ln {line}, Col {column}" in self.status_text())

    def visible(self, selector: str, within=None) -> list:
        return [element for element in (within or self.driver).find_elements(By.CSS_SELECTOR, selector) if element.is_displayed()]

    def editor_line(self, text: str, *, then_hints: bool = False):
        """The rendered editor line with this text, or (then_hints) this text and inlay hints after it.

        VS Code renders spaces as no-break spaces, and inlay hints as text of the line.
        """
        for line in self.visible(".monaco-editor .view-line"):
            shown = line.text.replace("\xa0", " ")
            if shown == text or (then_hints and shown.startswith(text)):
                return line
        return None

    def squiggles_at(self, text: str, kind: str) -> list | None:
        """The `kind` squiggles (`warning`, `error`, `info`) drawn on the line with this text; None: no such line shown."""
        line = self.editor_line(text)
        if line is None:
            return None
        top, height = line.rect["y"], line.rect["height"]
        return [s for s in self.visible(f".monaco-editor .squiggly-{kind}") if top - 1 <= s.rect["y"] + s.rect["height"] / 2 <= top + height + 1]

    def hover(self, element, contains: str) -> str:
        ActionChains(self.driver).move_to_element(element).perform()
        hovers = self.until(f"a hover containing {contains!r}", lambda: [h for h in self.visible(EDITOR_HOVER) if contains in h.text])
        return hovers[0].text

    def move_away(self) -> None:
        """The mouse onto the title bar and Escape: no editor hover stays open. Only the editor's hovers
        count: a workbench tooltip (the title bar's, a status bar item's) is another widget, and waiting
        for one to close made the session fail whenever the mouse came to rest on such an item."""
        ActionChains(self.driver).move_to_element(self.visible(".part.titlebar")[0]).perform()
        self.keys(Keys.ESCAPE)
        self.until("the editor's hover to close", lambda: not self.visible(EDITOR_HOVER) or None)

    def status_items(self) -> dict[str, str]:
        return {item.get_attribute("id"): item.text.strip() for item in self.visible(".statusbar-item")}

    def status_text(self) -> str:
        return " | ".join(self.status_items().values())

    def problem_rows(self) -> list[str]:
        return [row.text.replace("\n", " ") for row in self.visible(".markers-panel .monaco-list-row")]


def _run(session: Session) -> dict:
    """The user's walk through VS Code; returns what it showed."""
    record: dict = {}
    workspace = session.workspace
    original = (workspace / "train.py").read_text(encoding="utf-8")

    explorer_row = session.until(
        "train.py in the Explorer",
        lambda: [row for row in session.visible(".explorer-folders-view .monaco-list-row") if row.text.strip() == "train.py"],
    )
    record["explorer"] = [row.text.strip() for row in session.visible(".explorer-folders-view .monaco-list-row")]
    session.shot("workbench")
    explorer_row[0].click()
    session.until("the editor with train.py", lambda: session.visible(".monaco-editor .view-line"))
    session.mark("open the workbench and the file")

    session.go_to(76, 23)
    squiggle = session.until("the TL101 squiggle on line 76", lambda: session.squiggles_at(TL101_LINE, "warning"))
    session.mark("squiggles")
    session.shot("squiggles")
    record["squiggle_hover"] = session.hover(squiggle[0], "TL101")
    session.shot("squiggle-message")
    session.move_away()

    session.keys("m", modifiers=(Keys.CONTROL, Keys.SHIFT))
    session.until("TL101 at line 76 in the Problems panel", lambda: any("TL101" in row and "[Ln 76, Col 23]" in row for row in session.problem_rows()))
    record["problems"] = session.problem_rows()
    session.shot("problems")

    # back to the editor, where the cursor still is on `loss`; a move makes VS Code ask for code actions there
    session.keys("1", modifiers=(Keys.CONTROL,))
    session.keys(Keys.ARROW_RIGHT, Keys.ARROW_LEFT)
    bulb = session.until("the light bulb on line 76", lambda: session.visible(".lightBulbWidget"))
    bulb[0].click()
    actions = session.until("the Quick Fix menu", lambda: session.visible(".action-widget .monaco-list-row.action"))
    record["code_actions"] = [action.text for action in actions]
    session.shot("quick-fix-menu")
    fix = next((action for action in actions if action.text == "trainlint (TL101): detach before storing"), None)
    if fix is None:
        session.fail(f"no TL101 quick fix in the menu: {record['code_actions']}")
    fix.click()
    session.until("line 76 to read `total_loss += loss.detach()`", lambda: session.editor_line(FIXED_LINE))
    session.until("the TL101 squiggle on line 76 to go", lambda: session.squiggles_at(FIXED_LINE, "warning") == [])
    session.until("TL101 at line 76 to leave the Problems panel", lambda: not any("[Ln 76, Col 23]" in row for row in session.problem_rows()) or None)
    record["problems_after_fix"] = session.problem_rows()
    session.shot("fixed")
    session.keys("s", modifiers=(Keys.CONTROL,))
    expected = original.replace(f"\n{TL101_LINE}\n", f"\n{FIXED_LINE}\n", 1)
    session.until("the fixed file to be saved", lambda: (workspace / "train.py").read_text(encoding="utf-8") == expected)
    record["saved_as_expected"] = True
    session.mark("problems and quick fix")

    session.keys("j", modifiers=(Keys.CONTROL,))  # the panel closes: room for the hover
    session.until("the panel to close", lambda: not session.visible(".markers-panel") or None)
    session.go_to(101, 5)
    model_line = session.until("line 101 in the editor", lambda: session.editor_line(MODEL_LINE, then_hints=True))
    token = next(span for span in model_line.find_elements(By.CSS_SELECTOR, "span > span") if "from_pretrained" in span.text)
    record["vram_hover"] = session.hover(token, "VRAM")
    record["inlay_hint"] = model_line.text.replace("\xa0", " ")[len(MODEL_LINE):].strip()
    record["status_bar"] = session.status_items()
    session.shot("vram-hover")
    session.move_away()
    session.mark("VRAM hover and status bar")

    # The user clears trainlint.path in the Settings editor (Remote tab); the extension restarts the server
    # from trainlint.interpreter, as `python -c <guard> server`.
    record["servers_with_path"] = session.until("the trainlint.path server", lambda: _servers(workspace))
    session.keys(",", modifiers=(Keys.CONTROL,))
    remote = session.until(
        "the Remote tab of the Settings editor",
        lambda: [tab for tab in session.visible(".settings-editor .settings-tabs-widget .action-label") if tab.text.startswith("Remote")],
    )
    remote[0].click()
    session.keys("trainlint.path")  # into the search box, which has the focus
    box = session.until("the trainlint.path setting", lambda: session.visible('.settings-editor [data-key="trainlint.path"] input'))
    box[0].click()
    session.keys("a", modifiers=(Keys.CONTROL,))
    session.keys(Keys.BACKSPACE)
    session.until("VS Code to save the cleared setting", lambda: "trainlint.path" not in session.machine_settings())
    record["servers_with_interpreter"] = session.until(
        "the server to restart from trainlint.interpreter",
        lambda: (servers := _servers(workspace)) and all(argv[1] == "-c" for argv in servers) and servers,
    )
    session.shot("settings")
    notifications = [toast.text for toast in session.visible(".notifications-toasts .notification-toast")]
    session.keys(Keys.ESCAPE)
    session.until("the Settings editor to close", lambda: not session.visible(".settings-editor") or None)
    session.keys("1", modifiers=(Keys.CONTROL,))
    session.keys("z", modifiers=(Keys.CONTROL,))  # undo the fix: only the new server can report TL101 again
    session.go_to(76, 23)
    session.until("the restarted server's TL101 squiggle on line 76", lambda: session.squiggles_at(TL101_LINE, "warning"))
    session.shot("restarted")
    notifications += [toast.text for toast in session.visible(".notifications-toasts .notification-toast")]
    record["notifications"] = notifications
    record["output_channel"] = session.trainlint_output()
    session.mark("restart with trainlint.interpreter")
    record["imported"] = _imported_modules(workspace)
    return record


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    for path, what in ((NODE, "code-server's Node.js"), (CODE_SERVER, "code-server"), (CHROMIUM, "Chromium"), (CHROMEDRIVER, "chromedriver")):
        _require(path, what)
    if selenium is None:
        pytest.fail(f"selenium is not installed for {sys.executable}: install the dev extra (`make install-dev`)")
    vsix = _vsix()
    if OUTPUT.exists():
        shutil.rmtree(OUTPUT)
    OUTPUT.mkdir(parents=True)
    started = time.monotonic()
    run = Session(tmp_path_factory.mktemp("vscode-e2e"), OUTPUT)
    versions = {
        "code-server": _version([str(NODE), str(CODE_SERVER), "--version"], run.environment()),
        "node": _version([str(NODE), "--version"]),
        "chromium": _version([str(CHROMIUM), "--version"]),
        "chromedriver": _version([str(CHROMEDRIVER), "--version"]),
        "selenium": selenium.__version__,
    }
    try:
        run.prepare(vsix)
        run.start()
        record = _run(run)
    finally:
        run.stop()
        (OUTPUT / "versions.json").write_text(
            json.dumps({**versions, "seconds": round(time.monotonic() - started, 1), "steps": run.timings}, indent=2) + "\n",
            encoding="utf-8",
        )
    record["versions"] = versions
    if os.environ.get("TRAINLINT_README_IMAGES") == "1":
        images = ROOT / "docs" / "images"
        images.mkdir(exist_ok=True)
        for shot, name in README_IMAGES.items():
            shutil.copy(OUTPUT / shot, images / name)
    return record


def test_it_is_a_real_vs_code(session):
    assert re.match(r"4\.\d+\.\d+ \w+ with Code 1\.\d+\.\d+$", session["versions"]["code-server"]), session["versions"]
    assert {"train.py", "pyproject.toml"} <= set(session["explorer"]), session["explorer"]


def test_tl101_squiggle_shows_its_message(session):
    hover = session["squiggle_hover"]
    assert "keeps the autograd graph of every iteration alive" in hover, hover
    assert "TL101" in hover and "trainlint" in hover, hover


def test_problems_panel_lists_tl101_with_its_message(session):
    rows = session["problems"]
    tl101 = [row for row in rows if "[Ln 76, Col 23]" in row]
    assert len(tl101) == 1, rows
    assert "TL101" in tl101[0] and "`total_loss` keeps the autograd graph" in tl101[0], tl101
    # the example's other findings: TL102 on evaluate() and TL101 on line 90
    assert any("TL102" in row and "[Ln 83, Col 5]" in row for row in rows), rows
    assert any("TL101" in row and "[Ln 90, Col 23]" in row for row in rows), rows


def test_quick_fix_from_the_light_bulb_changes_the_text(session):
    assert session["code_actions"] == ["trainlint (TL101): detach before storing", "Disable TL101 for this line"], session["code_actions"]
    assert session["saved_as_expected"]
    assert not any("[Ln 76, Col 23]" in row for row in session["problems_after_fix"])
    assert any("TL102" in row for row in session["problems_after_fix"]), "the other findings stay"


def test_vram_hover_on_the_model_line(session):
    hover = session["vram_hover"]
    assert hover.startswith("trainlint · VRAM — gpt2"), hover
    peak = re.search(r"Peak per GPU ([\d.]+) GiB", hover)
    assert peak and float(peak.group(1)) > 0, hover
    assert "NVIDIA A100 SXM4 80GB" in hover and "FITS" in hover, "the pyproject's target-gpu gives the verdict"
    assert re.fullmatch(r"≈ [\d.]+ GiB \([\d.]+–[\d.]+\) · A100-80GB( \d+%)?", session["inlay_hint"]), session["inlay_hint"]


def test_status_bar_shows_the_vram_estimate(session):
    vram = [text for text in session["status_bar"].values() if "VRAM" in text]
    assert len(vram) == 1, session["status_bar"]
    assert re.fullmatch(r"VRAM: gpt2 · [\d.]+ GiB · FITS", vram[0]), vram
    peak = re.search(r"Peak per GPU ([\d.]+ GiB)", session["vram_hover"])
    assert peak and peak.group(1) in vram[0], "the status bar and the hover agree"


def test_readme_quotes_the_status_bar_vs_code_showed(session):
    [vram] = [text for text in session["status_bar"].values() if "VRAM" in text]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"`{vram}`" in readme, f"README's VS Code section should quote {vram!r}: update it (and `make readme-images`)"


def test_interpreter_setting_restarts_a_server_that_imports_nothing_from_the_workspace(session):
    trainlint = str(Path(sys.executable).parent / "trainlint")
    assert [argv[1:] for argv in session["servers_with_path"]] == [[trainlint, "server"]]
    [argv] = session["servers_with_interpreter"]
    assert argv[1] == "-c" and "runpy.run_module('trainlint'" in argv[2], argv
    assert "(from trainlint.interpreter)" in session["output_channel"], session["output_channel"]
    assert session["notifications"] == [], "changing the setting pops up nothing"
    # both servers ran in the workspace among json.py, libcst.py, trainlint/ ...; none of them was imported
    assert session["imported"] == [], session["imported"]


def test_screenshots_of_every_step(session):
    shots = sorted(path.name for path in OUTPUT.glob("*.png"))
    assert shots == [
        "01-workbench.png", "02-squiggles.png", "03-squiggle-message.png", "04-problems.png",
        "05-quick-fix-menu.png", "06-fixed.png", "07-vram-hover.png", "08-settings.png", "09-restarted.png",
    ], shots
