// Regenerates the `trainlint.targetGpu` enum in package.json from `trainlint gpus`.
// Usage: npm run update-gpu-ids [-- /path/to/trainlint]   (default: ../.venv/bin/trainlint)
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const trainlint = process.argv[2] ?? join(root, "..", ".venv", "bin", "trainlint");
const table = execFileSync(trainlint, ["gpus"], { encoding: "utf8" });

// Columns: id, name, memory GiB, usable GiB, vendor/stack. The first line is the header.
const ids = [];
const descriptions = [];
for (const line of table.split("\n").slice(1)) {
  const match = /^(\S+)\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$/.exec(line);
  if (match === null) continue;
  const [, id, name, memory, usable] = match;
  ids.push(id);
  descriptions.push(`${name}: ${memory} GiB (${usable} GiB usable)`);
}
if (ids.length === 0) throw new Error(`no GPU ids found in the output of ${trainlint} gpus`);

const path = join(root, "package.json");
const manifest = JSON.parse(readFileSync(path, "utf8"));
const setting = manifest.contributes.configuration.properties["trainlint.targetGpu"];
setting.enum = ["", ...ids];
setting.enumDescriptions = ["Use the project's `target-gpu`, if any.", ...descriptions];
writeFileSync(path, JSON.stringify(manifest, null, 2) + "\n");
console.log(`trainlint.targetGpu: ${ids.length} GPU ids written to package.json`);
