/**
 * End to end, without VS Code: the real trainlint server over stdio, driven the way the extension's
 * language client drives it (same initializationOptions, pull diagnostics, quick fix, didChange).
 *
 * The Python that runs the server: $TRAINLINT_PYTHON, else ../.venv/bin/python next to this folder.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createMessageConnection, type MessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { initializationOptions, serverSettings, summarizeVram } from "../src/settings";
import { IMPORT_CHECK_ARGS, moduleArgs, resolveServerCommand } from "../src/serverCommand";

const EXTENSION_ROOT = resolve(__dirname, "..", "..");
const PYTHON = process.env.TRAINLINT_PYTHON || resolve(EXTENSION_ROOT, "..", ".venv", "bin", "python");
const TIMEOUT_MS = 30_000;

const BUGGY = `import torch
from torch import nn

model = nn.Linear(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
for step in range(100):
    x = torch.randn(32, 10)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(loss)
`;

/**
 * What a hostile workspace plants to shadow the modules the server (and the extension's checks) import: the
 * standard library's `json` and `venv`, `libcst`, `runpy` and `pip`, and trainlint itself. Each, if imported,
 * leaves a marker file next to itself.
 */
const HOSTILE_MODULES = ["json.py", "venv.py", "libcst.py", "runpy.py", "pip.py", join("trainlint", "__init__.py")];

function plantHostileModules(folder: string): void {
  for (const module of HOSTILE_MODULES) {
    mkdirSync(join(folder, module, ".."), { recursive: true });
    writeFileSync(join(folder, module), "open(__file__ + '.imported', 'w').close()\n");
  }
}

/** The hostile modules that were imported (their markers), relative to the folder. */
function importedModules(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".imported"))
    .map((name) => name.slice(0, -".imported".length))
    .sort();
}

interface Position { line: number; character: number }
interface Range { start: Position; end: Position }
interface TextEdit { range: Range; newText: string }
interface Diagnostic { range: Range; code?: string | number; message: string; source?: string }
interface CodeAction { title: string; kind?: string; diagnostics?: Diagnostic[]; edit?: { changes?: Record<string, TextEdit[]> } }
interface DiagnosticReport { kind: "full" | "unchanged"; items?: Diagnostic[]; resultId?: string }

/** The `trainlint` section as VS Code would return it with every setting at its default (from package.json). */
function defaultSection(): Record<string, unknown> {
  const manifest = JSON.parse(readFileSync(join(EXTENSION_ROOT, "package.json"), "utf8"));
  const properties: Record<string, { default: unknown }> = manifest.contributes.configuration.properties;
  return Object.fromEntries(Object.entries(properties).map(([key, value]) => [key.replace(/^trainlint\./, ""), value.default]));
}

/** LSP positions (UTF-16 code units, which is what JS strings index) to offsets. */
function offsetOf(text: string, position: Position): number {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    const next = text.indexOf("\n", offset);
    if (next === -1) return text.length;
    offset = next + 1;
  }
  const lineEnd = text.indexOf("\n", offset);
  return Math.min(offset + position.character, lineEnd === -1 ? text.length : lineEnd);
}

/** Applies non-overlapping LSP text edits, as a client does: all ranges refer to the original text. */
export function applyEdits(text: string, edits: TextEdit[]): string {
  const spans = edits
    .map((edit) => ({ start: offsetOf(text, edit.range.start), end: offsetOf(text, edit.range.end), newText: edit.newText }))
    .sort((a, b) => b.start - a.start || b.end - a.end);
  let result = text;
  for (const span of spans) {
    result = result.slice(0, span.start) + span.newText + result.slice(span.end);
  }
  return result;
}

function withTimeout<T>(promise: PromiseLike<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${TIMEOUT_MS} ms: ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([Promise.resolve(promise), timeout]).finally(() => clearTimeout(timer));
}

describe("a hostile workspace", () => {
  let folder: string;
  before(() => {
    assert.ok(existsSync(PYTHON), `no Python at ${PYTHON}: set TRAINLINT_PYTHON to one with trainlint installed`);
    folder = mkdtempSync(join(tmpdir(), "trainlint-hostile-"));
  });
  after(() => rmSync(folder, { recursive: true, force: true }));

  const runIn = (args: string[]) => spawnSync(PYTHON, args, { cwd: folder, encoding: "utf8", timeout: TIMEOUT_MS });

  test("its modules are imported by a plain `python -m` there (what the guard prevents)", () => {
    plantHostileModules(folder);
    runIn(["-m", "trainlint", "--version"]);
    assert.ok(importedModules(folder).includes(join("trainlint", "__init__.py")), `the workspace's trainlint/ was not imported: ${importedModules(folder)}`);
    rmSync(folder, { recursive: true, force: true });
    mkdirSync(folder);
  });

  test("the extension's import check and its pip command import nothing from it", () => {
    plantHostileModules(folder);
    const check = runIn(IMPORT_CHECK_ARGS);
    assert.equal(check.status, 0, check.stderr);
    const pip = runIn(moduleArgs("pip", ["--version"]));
    assert.equal(pip.status, 0, pip.stderr);
    assert.match(pip.stdout, /^pip /);
    assert.deepEqual(importedModules(folder), []);
  });
});

describe("applyEdits", () => {
  test("applies edits against the original text, last first", () => {
    const text = "ab\ncd\n";
    const edits = [
      { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } }, newText: "X" },
      { range: { start: { line: 1, character: 1 }, end: { line: 1, character: 2 } }, newText: "YY" },
    ];
    assert.equal(applyEdits(text, edits), "Xb\ncYY\n");
  });
});

// The server tests need a Python with trainlint: a missing one is a failure, not a skip.
describe("trainlint server over stdio", () => {
  before(() => {
    assert.ok(existsSync(PYTHON), `no Python at ${PYTHON}: set TRAINLINT_PYTHON to one with trainlint installed`);
  });

  let server: ChildProcessWithoutNullStreams;
  let connection: MessageConnection;
  let folder: string;
  const shown: { type: number; message: string }[] = [];
  let stderr = "";
  let section = defaultSection(); // what VS Code answers for the `trainlint` section

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), "trainlint-vscode-"));
    plantHostileModules(folder); // the server runs in the workspace folder, as the language client starts it
    const command = resolveServerCommand({ interpreter: PYTHON });
    server = spawn(command.command, command.args, { cwd: folder });
    server.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const failedToStart = new Promise<never>((_, reject) => {
      server.once("error", (error) => reject(new Error(`cannot run ${PYTHON}: ${error.message}`)));
      server.once("exit", (code) => reject(new Error(`the server exited with ${code} during initialize:\n${stderr}`)));
    });
    failedToStart.catch(() => undefined); // only raced against initialize below
    if (server.pid === undefined) await failedToStart; // e.g. no such Python: fail before talking to it
    connection = createMessageConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    connection.onNotification("window/showMessage", (params: { type: number; message: string }) => shown.push(params));
    connection.onNotification("window/logMessage", () => undefined);
    // As the extension's middleware answers it: only the settings the server knows.
    connection.onRequest("workspace/configuration", (params: { items: { section?: string }[] }) =>
      params.items.map((item) => (item.section === "trainlint" ? serverSettings(section) : null)),
    );
    connection.onRequest("client/registerCapability", () => null);
    connection.onRequest("workspace/diagnostic/refresh", () => null);
    connection.onRequest("workspace/inlayHint/refresh", () => null);
    connection.listen();

    const initialize = connection.sendRequest("initialize", {
        processId: process.pid,
        rootUri: pathToFileURL(folder).href,
        workspaceFolders: [{ uri: pathToFileURL(folder).href, name: "test" }],
        initializationOptions: initializationOptions(defaultSection()),
        capabilities: {
          general: { positionEncodings: ["utf-16"] },
          workspace: { configuration: true, workspaceFolders: true, diagnostics: { refreshSupport: true }, applyEdit: true },
          textDocument: {
            synchronization: { didSave: true, dynamicRegistration: false },
            diagnostic: { dynamicRegistration: false, relatedDocumentSupport: false },
            codeAction: {
              codeActionLiteralSupport: { codeActionKind: { valueSet: ["quickfix", "source", "source.fixAll"] } },
              resolveSupport: { properties: ["edit"] },
            },
            hover: { contentFormat: ["markdown", "plaintext"] },
          },
        },
    });
    const result = await withTimeout(Promise.race([initialize, failedToStart]), "initialize");
    const capabilities = (result as { capabilities: Record<string, unknown> }).capabilities;
    assert.ok(capabilities.diagnosticProvider, "the server offers pull diagnostics");
    await connection.sendNotification("initialized", {});
  });

  after(async () => {
    if (connection !== undefined) {
      await withTimeout(connection.sendRequest("shutdown"), "shutdown").catch(() => undefined);
      await connection.sendNotification("exit").catch(() => undefined);
      connection.dispose();
    }
    if (server !== undefined && server.exitCode === null) {
      await new Promise((done) => {
        const timer = setTimeout(() => {
          server.kill();
          done(undefined);
        }, 5_000);
        server.once("exit", () => {
          clearTimeout(timer);
          done(undefined);
        });
      });
    }
    rmSync(folder, { recursive: true, force: true });
  });

  test("TL101 is reported, its quick fix applies, and it is gone afterwards", async () => {
    const path = join(folder, "train.py");
    writeFileSync(path, BUGGY);
    const uri = pathToFileURL(path).href;
    let text = BUGGY;
    await connection.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId: "python", version: 1, text } });

    const pull = (): Promise<DiagnosticReport> =>
      withTimeout(connection.sendRequest("textDocument/diagnostic", { textDocument: { uri } }), "textDocument/diagnostic");

    const first = await pull();
    assert.equal(first.kind, "full");
    const tl101 = first.items?.find((item) => item.code === "TL101");
    assert.ok(tl101, `TL101 expected among ${JSON.stringify(first.items?.map((item) => item.code))}; server stderr:\n${stderr}`);
    assert.equal(tl101.range.start.line, 12, "on `history.append(loss)`");

    const actions = await withTimeout(
      connection.sendRequest<CodeAction[] | null>("textDocument/codeAction", {
        textDocument: { uri },
        range: tl101.range,
        context: { diagnostics: [tl101], only: ["quickfix"] },
      }),
      "textDocument/codeAction",
    );
    const fix = actions?.find((action) => action.kind === "quickfix" && action.title.includes("TL101") && action.edit?.changes?.[uri]);
    assert.ok(fix, `a TL101 quick fix expected among ${JSON.stringify(actions?.map((action) => action.title))}`);
    text = applyEdits(text, fix.edit?.changes?.[uri] ?? []);
    assert.notEqual(text, BUGGY);
    assert.match(text.split("\n")[12], /history\.append\(loss\.(detach\(\)|item\(\))/);

    await connection.sendNotification("textDocument/didChange", { textDocument: { uri, version: 2 }, contentChanges: [{ text }] });
    const second = await pull();
    assert.equal(second.kind, "full");
    assert.deepEqual(second.items?.filter((item) => item.code === "TL101"), [], "TL101 gone after the fix");
  });

  test("showVramBreakdown returns text the status bar can summarise", async () => {
    const path = join(folder, "train.py");
    const uri = pathToFileURL(path).href;
    const breakdown = await withTimeout(
      connection.sendRequest<unknown>("workspace/executeCommand", { command: "trainlint.showVramBreakdown", arguments: [uri] }),
      "workspace/executeCommand",
    );
    assert.equal(typeof breakdown, "string");
    const summary = summarizeVram(breakdown);
    assert.ok(summary.text?.startsWith("VRAM"), `status text from ${JSON.stringify(breakdown)}`);
    assert.equal(summary.tooltip, (breakdown as string).trim());
  });

  test("the status bar shows the model and peak of a script with an estimate", async () => {
    const path = join(folder, "finetune.py");
    const text = 'from transformers import AutoModelForCausalLM\n\nmodel = AutoModelForCausalLM.from_pretrained("gpt2")\nbatch_size = 8\n';
    writeFileSync(path, text);
    const uri = pathToFileURL(path).href;
    await connection.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId: "python", version: 1, text } });
    const messagesBefore = shown.length;
    // as the extension asks for it: the status bar shows the text, so no message window
    const breakdown = await withTimeout(
      connection.sendRequest<unknown>("workspace/executeCommand", { command: "trainlint.showVramBreakdown", arguments: [{ uri, show: false }] }),
      "workspace/executeCommand",
    );
    const summary = summarizeVram(breakdown);
    assert.match(summary.text ?? "", /^VRAM: gpt2 · [\d.]+ GiB$/, `status text from ${JSON.stringify(breakdown)}`);
    assert.equal(summary.tooltip, (breakdown as string).trim());
    assert.equal(shown.length, messagesBefore, "no message window for a status-bar request");
  });

  test("a changed targetGpu is pulled through workspace/configuration and gives a verdict", async () => {
    const uri = pathToFileURL(join(folder, "finetune.py")).href;
    section = { ...defaultSection(), targetGpu: "t4" };
    await connection.sendNotification("workspace/didChangeConfiguration", { settings: null });
    let summary = summarizeVram(undefined);
    for (let attempt = 0; attempt < 50 && !/(FITS|TIGHT|OOM|UNKNOWN)$/.test(summary.text ?? ""); attempt++) {
      await new Promise((done) => setTimeout(done, 100)); // the server pulls the configuration asynchronously
      summary = summarizeVram(
        await withTimeout(
          connection.sendRequest<unknown>("workspace/executeCommand", { command: "trainlint.showVramBreakdown", arguments: [uri] }),
          "workspace/executeCommand",
        ),
      );
    }
    assert.match(summary.text ?? "", /^VRAM: gpt2 · [\d.]+ GiB · (FITS|TIGHT|OOM|UNKNOWN)$/, summary.tooltip);
    assert.match(summary.tooltip, /T4/);
  });

  test("nothing in the workspace was imported by the server", () => {
    assert.deepEqual(importedModules(folder), [], `server stderr:\n${stderr}`);
  });

  test("the default settings raised no warnings", () => {
    const warnings = shown.filter((message) => message.type <= 2);
    assert.deepEqual(warnings, [], `server stderr:\n${stderr}`);
  });
});
