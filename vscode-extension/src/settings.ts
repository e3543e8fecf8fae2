/**
 * The part of the `trainlint` configuration section the server reads, and the short status-bar form of the
 * server's VRAM breakdown. Pure: no VS Code API, so it is unit-tested.
 */

/** Settings the server understands (declared in trainlint/settings.py, EDITOR_SETTINGS; a test checks this list against it); `path` and `interpreter` are the extension's own. */
export const SERVER_SETTING_KEYS = ["targetGpu", "targetModel", "select", "ignore", "severity", "run", "debounceMs", "inlayHints"] as const;

export type ServerSettings = Partial<Record<(typeof SERVER_SETTING_KEYS)[number], unknown>>;

/**
 * Only the keys the server knows (it warns about any other), leaving out unset ones.
 * `section` is the `trainlint` configuration section, or anything else (then: no settings).
 */
export function serverSettings(section: unknown): ServerSettings {
  const result: ServerSettings = {};
  if (typeof section !== "object" || section === null || Array.isArray(section)) {
    return result;
  }
  const values = section as Record<string, unknown>;
  for (const key of SERVER_SETTING_KEYS) {
    if (values[key] !== undefined) {
      result[key] = values[key];
    }
  }
  return result;
}

/** What the server is initialised with: it reads `{ settings: {...} }`. */
export function initializationOptions(section: unknown): { settings: ServerSettings } {
  return { settings: serverSettings(section) };
}

export interface VramSummary {
  /** Short text for the status bar, or undefined when there is nothing to show for the file. */
  text?: string;
  tooltip: string;
}

/**
 * The status-bar form of the `trainlint.showVramBreakdown` result, e.g. "VRAM: gpt2 · 17.7 GiB · TIGHT":
 * the model from the first line, the peak and the verdict, with the whole text as the tooltip.
 */
export function summarizeVram(breakdown: unknown): VramSummary {
  if (typeof breakdown !== "string" || breakdown.trim() === "") {
    return { tooltip: "" };
  }
  const text = breakdown.trim();
  const first = text.split("\n")[0].trim();
  if (!first.startsWith("trainlint · VRAM")) {
    return { tooltip: text }; // e.g. "trainlint: give the URI of an open document ...": nothing to show
  }
  if (/^No estimate/m.test(text)) {
    return { text: "VRAM: no estimate", tooltip: text };
  }
  const model = first.replace(/^trainlint · VRAM\s*(—|-)?\s*/, "").split(",")[0].trim();
  const peak = /Peak per GPU ([\d.]+ GiB)/.exec(text)?.[1];
  const verdict = /GiB usable — ([A-Z][A-Z ]*)\.?\s*$/m.exec(text)?.[1];
  const parts = [model, peak, verdict].filter((part) => part !== undefined && part !== "");
  return { text: parts.length > 0 ? `VRAM: ${parts.join(" · ")}` : first, tooltip: text };
}
