import { execFile, spawn } from "node:child_process";
import { homedir } from "node:os";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  MessageType,
  type ServerOptions,
  ShowMessageNotification,
} from "vscode-languageclient/node";
import { describe, IMPORT_CHECK_ARGS, moduleArgs, resolveServerCommand, type ServerCommand } from "./serverCommand";
import { initializationOptions, SERVER_SETTING_KEYS, serverSettings, summarizeVram } from "./settings";

const SECTION = "trainlint";
const VRAM_COMMAND = "trainlint.showVramBreakdown";
const FIX_ALL_COMMAND = "trainlint.fixAll";

/** The subset of the Python extension's API (ms-python.python) used here; every part may be missing. */
interface PythonApi {
  ready?: Promise<void>;
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment?(path: string): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] };
    onDidChangeExecutionDetails?: vscode.Event<unknown>;
  };
}

let output: vscode.OutputChannel;
let client: LanguageClient | undefined;
let statusBar: vscode.StatusBarItem;
let restarting: Promise<void> = Promise.resolve();
/** `trainlint.path` and `trainlint.interpreter` as they were when the running server was started. */
let startedWith = "";

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("trainlint");
  statusBar = vscode.window.createStatusBarItem("trainlint.vram", vscode.StatusBarAlignment.Right, 100);
  statusBar.name = "trainlint VRAM estimate";
  statusBar.command = VRAM_COMMAND;
  context.subscriptions.push(
    output,
    statusBar,
    vscode.commands.registerCommand("trainlint.restart", () => restart()),
    vscode.commands.registerCommand("trainlint.showLogs", () => output.show()),
    vscode.window.onDidChangeActiveTextEditor(() => void updateStatusBar()),
    vscode.workspace.onDidSaveTextDocument((document) => {
      if (document === vscode.window.activeTextEditor?.document) void updateStatusBar();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void restart()), // now it may load the project's plugins
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("trainlint.path") || event.affectsConfiguration("trainlint.interpreter")) {
        void restart();
      } else if (event.affectsConfiguration(SECTION)) {
        void updateStatusBar(); // the server re-reads the section itself; the target GPU changes the verdict
      }
    }),
  );
  // trainlint.fixAll / showVramBreakdown / printDebugInfo are registered by the language client from the
  // server's executeCommandProvider; the middleware below gives them the active document when called bare.

  const python = await pythonApi();
  const onInterpreterChange = python?.environments?.onDidChangeActiveEnvironmentPath ?? python?.settings?.onDidChangeExecutionDetails;
  if (onInterpreterChange !== undefined) {
    context.subscriptions.push(onInterpreterChange(() => void restart()));
  }
  void restart(); // not awaited: an "install trainlint?" prompt must not hold up activation
}

export function deactivate(): Thenable<void> | undefined {
  return client?.stop();
}

/** Stops the running server, if any, and starts one with the current settings. Calls are serialised. */
function restart(): Promise<void> {
  restarting = restarting.then(startServer, startServer);
  return restarting;
}

async function startServer(): Promise<void> {
  if (client !== undefined) {
    const old = client;
    client = undefined;
    await old.stop().catch((error) => output.appendLine(`trainlint: stopping the server failed: ${error}`));
  }
  statusBar.hide();
  startedWith = commandSettings();
  const resolved = await serverCommand();
  output.appendLine(`trainlint: starting ${describe(resolved)} (from ${resolved.source})`);
  if (resolved.python !== undefined && !(await hasTrainlint(resolved))) {
    return;
  }
  const serverOptions: ServerOptions = { command: resolved.command, args: resolved.args, options: { env: process.env } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      { notebook: "jupyter-notebook", language: "python" },
    ],
    // The server loads the project's own rule plugins only in a trusted workspace (docs/writing-rules.md).
    initializationOptions: { ...initializationOptions(settingsSection()), workspaceTrusted: vscode.workspace.isTrusted },
    synchronize: { configurationSection: SECTION },
    outputChannel: output,
    middleware: {
      workspace: {
        // The server pulls the `trainlint` section; it knows nothing of `path` / `interpreter` and would warn.
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) return answers;
          return answers.map((answer, index) => (params.items[index]?.section === SECTION ? serverSettings(answer) : answer));
        },
        // A changed path or interpreter replaces this server (see activate): telling it about the change would
        // race its shutdown and pop up "Sending notification workspace/didChangeConfiguration failed".
        didChangeConfiguration: (sections, next) => (commandSettings() === startedWith ? next(sections) : Promise.resolve()),
      },
      // Bare calls (command palette, status bar) get the active document's URI.
      executeCommand: (command, args, next) => {
        if (args.length > 0 || (command !== FIX_ALL_COMMAND && command !== VRAM_COMMAND)) return next(command, args);
        const uri = activeDocumentUri();
        if (uri === undefined) {
          void vscode.window.showWarningMessage("trainlint: open a Python file first.");
          return undefined;
        }
        return next(command, [uri]);
      },
    },
  };
  const started = new LanguageClient("trainlint", "trainlint", serverOptions, clientOptions);
  started.onNotification(ShowMessageNotification.type, (message) => showServerMessage(message.type, message.message));
  client = started;
  try {
    await started.start();
  } catch (error) {
    client = undefined;
    output.appendLine(`trainlint: the server did not start: ${error}`);
    void vscode.window
      .showErrorMessage(`trainlint: the server did not start (${describe(resolved)}). Set trainlint.path or trainlint.interpreter.`, "Show Logs", "Open Settings")
      .then((choice) => {
        if (choice === "Show Logs") output.show();
        if (choice === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "trainlint.");
      });
    return;
  }
  void updateStatusBar();
}

function commandSettings(): string {
  const config = vscode.workspace.getConfiguration(SECTION);
  return JSON.stringify([config.get("path"), config.get("interpreter")]);
}

function settingsSection(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration(SECTION);
  return Object.fromEntries(SERVER_SETTING_KEYS.map((key) => [key, config.get(key)]));
}

async function serverCommand(): Promise<ServerCommand> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  return resolveServerCommand(
    { path: config.get<string>("path"), interpreter: config.get<string>("interpreter") },
    { pythonExtension: await pythonFromExtension(), workspaceFolder: folder, home: homedir(), platform: process.platform },
  );
}

async function pythonApi(): Promise<PythonApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonApi>("ms-python.python");
  if (extension === undefined) return undefined;
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    await api?.ready;
    return api;
  } catch (error) {
    output.appendLine(`trainlint: the Python extension's API is not available: ${error}`);
    return undefined;
  }
}

/** The active interpreter of the Python extension, as a command (argv prefix), or undefined. */
async function pythonFromExtension(): Promise<string[] | undefined> {
  const api = await pythonApi();
  const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
  try {
    const environments = api?.environments;
    const active = environments?.getActiveEnvironmentPath(resource);
    if (environments !== undefined && active?.path) {
      const resolved = await environments.resolveEnvironment?.(active.path);
      return [resolved?.executable?.uri?.fsPath ?? active.path];
    }
    const command = api?.settings?.getExecutionDetails?.(resource).execCommand;
    return command && command.length > 0 ? command : undefined;
  } catch (error) {
    output.appendLine(`trainlint: could not read the Python extension's interpreter: ${error}`);
    return undefined;
  }
}

/** Whether `<python>` can import trainlint; if the module is missing, offers to install it (then restarts). */
async function hasTrainlint(resolved: ServerCommand): Promise<boolean> {
  const python = resolved.python ?? [resolved.command];
  const check = await run(python, IMPORT_CHECK_ARGS);
  if (check.ok) return true;
  output.appendLine(`trainlint: ${describe({ command: python[0], args: python.slice(1) })} cannot import trainlint: ${check.output.trim()}`);
  if (check.notFound) {
    void vscode.window.showErrorMessage(`trainlint: ${python[0]} was not found. Set trainlint.interpreter or select an interpreter.`, "Open Settings").then((choice) => {
      if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", "trainlint.");
    });
    return false;
  }
  const choice = await vscode.window.showWarningMessage(
    `trainlint is not installed for ${python.join(" ")}. Install it with pip?`,
    "Install",
    "Show Logs",
  );
  if (choice === "Show Logs") output.show();
  if (choice !== "Install") return false;
  const installed = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "Installing trainlint (pip install trainlint)..." },
    () => run(python, moduleArgs("pip", ["install", "trainlint"]), true),
  );
  if (!installed.ok) {
    output.show();
    void vscode.window.showErrorMessage("trainlint: `pip install trainlint` failed; see the logs.");
    return false;
  }
  void restart(); // queued after this start attempt
  return false;
}

function run(python: string[], args: string[], log = false): Promise<{ ok: boolean; notFound: boolean; output: string }> {
  return new Promise((resolve) => {
    if (log) {
      output.appendLine(`> ${describe({ command: python[0], args: [...python.slice(1), ...args] })}`);
      const child = spawn(python[0], [...python.slice(1), ...args]);
      child.stdout.on("data", (chunk: Buffer) => output.append(chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => output.append(chunk.toString()));
      child.on("error", (error) => resolve({ ok: false, notFound: (error as NodeJS.ErrnoException).code === "ENOENT", output: String(error) }));
      child.on("close", (code) => resolve({ ok: code === 0, notFound: false, output: "" }));
      return;
    }
    execFile(python[0], [...python.slice(1), ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ ok: error === null, notFound: (error as NodeJS.ErrnoException | null)?.code === "ENOENT", output: `${stdout}${stderr}` || String(error ?? "") });
    });
  });
}

function activeDocumentUri(): string | undefined {
  const document = vscode.window.activeTextEditor?.document;
  return document?.languageId === "python" ? document.uri.toString() : undefined;
}

function showServerMessage(type: MessageType, message: string): void {
  if (type === MessageType.Error) void vscode.window.showErrorMessage(message);
  else if (type === MessageType.Warning) void vscode.window.showWarningMessage(message);
  else void vscode.window.showInformationMessage(message);
}

/** The VRAM estimate of the active file in the status bar (the server's breakdown, first line; all of it as tooltip). */
async function updateStatusBar(): Promise<void> {
  const uri = activeDocumentUri();
  const running = client;
  if (uri === undefined || running === undefined || !running.isRunning()) {
    statusBar.hide();
    return;
  }
  try {
    // `show: false`: the status bar displays the text; no message window for it
    const breakdown: unknown = await running.sendRequest(ExecuteCommandRequest.type, {
      command: VRAM_COMMAND,
      arguments: [{ uri, show: false }],
    });
    if (uri !== activeDocumentUri()) return; // the user moved on; that editor's own update wins
    const summary = summarizeVram(breakdown);
    if (summary.text === undefined) {
      statusBar.hide();
      return;
    }
    statusBar.text = `$(chip) ${summary.text}`;
    statusBar.tooltip = summary.tooltip;
    statusBar.show();
  } catch (error) {
    output.appendLine(`trainlint: VRAM estimate failed: ${error}`);
    statusBar.hide();
  }
}
