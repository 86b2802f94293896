import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

/** Loads a model in a process of its own, as a worker does; what it left in its TMPDIR. */
function leftBehind(telemetry: string | undefined): string[] {
  const dir = mkdtempSync(join(tmpdir(), "ferry-ort-"));
  dirs.push(dir);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: dir };
  if (telemetry !== undefined) env.ORT_DISABLE_TELEMETRY = telemetry;
  // the module by its file, as the worker's instance threads load it
  const session = new URL("./in-process-session.ts", import.meta.url).href;
  const script = `
    import { InProcessSession } from ${JSON.stringify(session)};
    const session = await InProcessSession.load("models/digits/2/model.onnx", { executionProvider: "cpu", intraOpThreads: 1 });
    await session.release();`;
  execFileSync(
    process.execPath,
    ["--conditions=ferry-source", "--import", "tsx", "--input-type=module", "-e", script],
    { env, stdio: "pipe", timeout: 60_000 },
  );
  // tsx keeps its compile cache there too
  return readdirSync(dir).filter((name) => !name.startsWith("tsx-"));
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("ONNX Runtime's telemetry", () => {
  it("is off unless the operator asks: loading a model starts no uploader (it leaves no mat-debug log)", () => {
    expect(leftBehind(undefined)).toEqual([]);
  });

  it("an operator's own ORT_DISABLE_TELEMETRY=0 is kept (and shows what the first test looks for)", () => {
    // (its session file, `.ses`, beside it)
    expect(leftBehind("0")).toContainEqual(expect.stringMatching(/^mat-debug-\d+\.log$/));
  });
});
