/**
 * Which process to start as the trainlint language server. Pure: no VS Code API, so it is unit-tested.
 *
 * Order: `trainlint.path` (a trainlint executable, run as `<path> server`), then `trainlint.interpreter`,
 * then the interpreter selected in the Python extension, then `python3` (`python` on Windows); a Python is
 * run as `<python> -m trainlint server`.
 */

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for the logs and error messages. */
  source: "trainlint.path" | "trainlint.interpreter" | "python extension" | "default python";
  /** The Python command (argv prefix) when the server is run as a module, for the `-m trainlint` check. */
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

export const SERVER_ARGS = ["-m", "trainlint", "server"];

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
