/** Unit tests of the pure modules: which server command runs, and what the server is sent. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { describe as describeCommand, expandPath, IMPORT_CHECK_ARGS, moduleArgs, resolveServerCommand, SERVER_ARGS } from "../src/serverCommand";
import { initializationOptions, serverSettings, summarizeVram } from "../src/settings";

describe("resolveServerCommand", () => {
  test("trainlint.path wins and runs `<path> server`", () => {
    const command = resolveServerCommand({ path: "/opt/bin/trainlint", interpreter: "/usr/bin/python3" }, { pythonExtension: ["/env/bin/python"] });
    assert.deepEqual(command, { command: "/opt/bin/trainlint", args: ["server"], source: "trainlint.path" });
  });

  test("trainlint.interpreter comes before the Python extension", () => {
    const command = resolveServerCommand({ path: "", interpreter: "/usr/bin/python3" }, { pythonExtension: ["/env/bin/python"] });
    assert.equal(command.command, "/usr/bin/python3");
    assert.deepEqual(command.args, SERVER_ARGS);
    assert.deepEqual(command.python, ["/usr/bin/python3"]);
    assert.equal(command.source, "trainlint.interpreter");
  });

  test("the Python extension's command may have several words", () => {
    const command = resolveServerCommand({}, { pythonExtension: ["conda", "run", "-n", "ml", "python"] });
    assert.equal(command.command, "conda");
    assert.deepEqual(command.args, ["run", "-n", "ml", "python", ...SERVER_ARGS]);
    assert.equal(command.source, "python extension");
  });

  test("without any of them: python3, or python on Windows", () => {
    assert.equal(resolveServerCommand({ path: " ", interpreter: "" }, { pythonExtension: [] }).command, "python3");
    assert.equal(resolveServerCommand({}, { platform: "win32" }).command, "python");
    assert.equal(resolveServerCommand({}).source, "default python");
  });

  test("~ and ${workspaceFolder} are expanded", () => {
    const env = { home: "/home/me", workspaceFolder: "/work/project" };
    assert.equal(expandPath("~/venv/bin/python", env), "/home/me/venv/bin/python");
    assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", env), "/work/project/.venv/bin/python");
    assert.equal(expandPath("${userHome}/x", env), "/home/me/x");
    assert.equal(expandPath("/a~b", env), "/a~b");
    assert.equal(resolveServerCommand({ interpreter: "${workspaceFolder}/.venv/bin/python" }, env).command, "/work/project/.venv/bin/python");
  });

  test("a Python runs trainlint without -m: a guard takes the working directory off sys.path first", () => {
    const guard = /^import sys; sys\.path\[:\] = \[entry for entry in sys\.path if entry != ''\]; /;
    for (const settings of [{ interpreter: "/usr/bin/python3" }, {}]) {
      const { args } = resolveServerCommand(settings, { pythonExtension: [] });
      assert.ok(!args.includes("-m"), `-m imports from the working directory: ${args}`);
      assert.equal(args[0], "-c");
      assert.match(args[1], guard);
      assert.match(args[1], /; import runpy; runpy\.run_module\('trainlint', run_name='__main__', alter_sys=True\)$/);
      assert.deepEqual(args.slice(2), ["server"]);
    }
    // the same guard in front of the import check and of `pip install`
    assert.match(IMPORT_CHECK_ARGS[1], guard);
    const pip = moduleArgs("pip", ["install", "trainlint"]);
    assert.match(pip[1], guard);
    assert.deepEqual(pip.slice(2), ["install", "trainlint"]);
    assert.ok(!SERVER_ARGS[1].includes('"'), "no double quotes: Windows command lines quote with them");
  });

  test("describe quotes words with spaces", () => {
    assert.equal(describeCommand({ command: "/my env/python", args: ["-m", "trainlint"] }), '"/my env/python" -m trainlint');
  });
});

describe("server settings", () => {
  test("only the keys the server knows are sent; unset ones are left out", () => {
    const section = { targetGpu: "t4", select: null, severity: {}, path: "/x", interpreter: "", run: "onSave", debounceMs: undefined };
    assert.deepEqual(serverSettings(section), { targetGpu: "t4", select: null, severity: {}, run: "onSave" });
    assert.deepEqual(initializationOptions(section), { settings: serverSettings(section) });
  });

  test("anything that is not an object gives no settings", () => {
    assert.deepEqual(serverSettings(null), {});
    assert.deepEqual(serverSettings(["targetGpu"]), {});
    assert.deepEqual(serverSettings("t4"), {});
  });
});

describe("summarizeVram", () => {
  const breakdown = [
    "trainlint · VRAM — gpt2, 0.12B parameters",
    "",
    "- weights: 0.5 GiB",
    "",
    "Peak per GPU 17.7 GiB (5.4–24.3), allocator and CUDA context included.",
    "NVIDIA T4: 14.6 GiB usable — OOM.",
  ].join("\n");

  test("model, peak and verdict; the whole text as tooltip", () => {
    assert.deepEqual(summarizeVram(breakdown), { text: "VRAM: gpt2 · 17.7 GiB · OOM", tooltip: breakdown });
  });

  test("no verdict without a target GPU", () => {
    const text = breakdown.replace("NVIDIA T4: 14.6 GiB usable — OOM.", "Set `targetGpu` for a verdict.");
    assert.equal(summarizeVram(text).text, "VRAM: gpt2 · 17.7 GiB");
  });

  test("no estimate", () => {
    const text = "trainlint · VRAM\n\nNo estimate: no model found in the script: give --model.";
    assert.deepEqual(summarizeVram(text), { text: "VRAM: no estimate", tooltip: text });
  });

  test("nothing to show for other answers", () => {
    assert.equal(summarizeVram("trainlint: give the URI of an open document to show its VRAM breakdown").text, undefined);
    assert.equal(summarizeVram(null).text, undefined);
    assert.equal(summarizeVram("").text, undefined);
  });
});
