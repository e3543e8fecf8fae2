/**
 * Which process to start as the trainlint language server. Pure: no VS Code API, so it is unit-tested.
 *
 * Order: `trainlint.path` (a trainlint executable, run as `<path> server`), then `trainlint.interpreter`,
 * then the interpreter selected in the Python extension, then `python3` (`python` on Windows); a Python runs the
 * `trainlint` module the way `<python> -m trainlint server` would, but with the working directory off `sys.path`.
 *
 * Why not plain `-m`: the language client starts the server in the workspace folder, and `-m` (like `-c`) puts
 * the working directory first on `sys.path`, so a `json.py`, `libcst.py` or `trainlint/` in the user's folder would
 * be imported by the server instead of the real one: opening a folder would run its code. `-P` turns that off,
 * but only from Python 3.11 (trainlint supports 3.10); `-I` also drops user site-packages and PYTHONPATH, where
 * trainlint may be installed. So `-c` runs a guard first that removes the working-directory entry (`''`, which
 * `-c` inserts, and any empty PYTHONPATH entry), then imports nothing but the standard library's `runpy`.
 */

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for the logs and error messages. */
  source: "trainlint.path" | "trainlint.interpreter" | "python extension" | "default python";
  /** The Python command (argv prefix) when the server is run as a module, for the import check and `pip install`. */
  python?: string[];
}

export interface CommandSettings {
  /** `trainlint.path`: empty means not set. */
  path?: string;
  /** `trainlint.interpreter`: empty means not set. */
  interpreter?: string;
}

export interface Environment {
  /** The Python extension's command for the active interpreter (it may be more than one word). */
  pythonExtension?: string[];
  workspaceFolder?: string;
  home?: string;
  platform?: string;
}

/** Python statement that takes the working directory (the empty entry) off `sys.path`; it imports nothing. */
const PATH_GUARD = "import sys; sys.path[:] = [entry for entry in sys.path if entry != '']";

/** Arguments that make a Python run `module` as `-m module ...args` does, without importing from the working directory. */
export function moduleArgs(module: string, args: string[] = []): string[] {
  return ["-c", `${PATH_GUARD}; import runpy; runpy.run_module('${module}', run_name='__main__', alter_sys=True)`, ...args];
}

/** Arguments that check, the same guarded way, that a Python can import the trainlint server. */
export const IMPORT_CHECK_ARGS = ["-c", `${PATH_GUARD}; import trainlint.server.server`];

export const SERVER_ARGS = moduleArgs("trainlint", ["server"]);

/** Expands `~` and `${workspaceFolder}` / `${userHome}` in a path the user typed. */
export function expandPath(value: string, env: Environment): string {
  let result = value.trim();
  if (env.home !== undefined) {
    result = result.replace(/\$\{userHome\}/g, env.home);
    if (result === "~" || result.startsWith("~/") || result.startsWith("~\\")) {
      result = env.home + result.slice(1);
    }
  }
  if (env.workspaceFolder !== undefined) {
    result = result.replace(/\$\{workspaceFolder\}/g, env.workspaceFolder);
  }
  return result;
}

export function resolveServerCommand(settings: CommandSettings, env: Environment = {}): ServerCommand {
  const path = expandPath(settings.path ?? "", env);
  if (path !== "") {
    return { command: path, args: ["server"], source: "trainlint.path" };
  }
  const interpreter = expandPath(settings.interpreter ?? "", env);
  if (interpreter !== "") {
    return fromPython([interpreter], "trainlint.interpreter");
  }
  const fromExtension = (env.pythonExtension ?? []).filter((part) => part !== "");
  if (fromExtension.length > 0) {
    return fromPython(fromExtension, "python extension");
  }
  return fromPython([env.platform === "win32" ? "python" : "python3"], "default python");
}

function fromPython(python: string[], source: ServerCommand["source"]): ServerCommand {
  return { command: python[0], args: [...python.slice(1), ...SERVER_ARGS], source, python };
}

/** The command line as one readable string, for the logs. */
export function describe(command: { command: string; args: string[] }): string {
  return [command.command, ...command.args].map((part) => (/\s/.test(part) ? JSON.stringify(part) : part)).join(" ");
}
