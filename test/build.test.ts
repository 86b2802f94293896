import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deletePrefix } from "@ferry/transport";
import { afterAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { freePort } from "../scripts/free-port.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { REDIS_URL, waitFor } from "./helpers/stack.js";

// The image's recipe, run here: build, stage with infra/docker/stage.sh, a production-only
// install in a temp dir, then the API and a worker from the built output with plain node.
const dir = mkdtempSync(join(tmpdir(), "ferry-image-"));
const prefix = `ferry-test-build-${process.pid}`;
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (!exited(c)) c.kill("SIGKILL");
  await deletePrefix(REDIS_URL, prefix);
  rmSync(dir, { recursive: true, force: true });
});

function start(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [entry], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      REDIS_URL,
      FERRY_PREFIX: prefix,
      MODEL_REPOSITORY: join(dir, "models"),
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: "ignore",
  });
  children.push(child);
  return child;
}

describe("the built output, alone", () => {
  it("installs without dev dependencies and serves", async () => {
    execFileSync("npm", ["run", "build"], { stdio: "ignore" });
    execFileSync("sh", ["infra/docker/stage.sh", dir]);
    execFileSync(
      "npm",
      [
        "ci",
        "--omit=dev",
        "--omit=optional",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--prefer-offline",
      ],
      {
        cwd: dir,
        env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
        stdio: "ignore",
      },
    );
    for (const dev of ["tsx", "typescript", "vitest", "@biomejs/biome"])
      expect(existsSync(join(dir, "node_modules", dev))).toBe(false);
    expect(existsSync(join(dir, "node_modules", "onnxruntime-node"))).toBe(true);
    expect(existsSync(join(dir, "models", "build"))).toBe(false);

    const [apiPort, workerPort] = [await freePort(), await freePort()];
    const api = start("apps/api/dist/main.js", { PORT: String(apiPort) });
    const worker = start("apps/worker/dist/main.js", {
      WORKER_PORT: String(workerPort),
      WORKER_MODELS: "digits",
    });
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${workerPort}/health/ready`)).status === 200,
      60_000,
    );
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${apiPort}/v2/health/ready`)).status === 200,
      30_000,
    );
    const features = samples.digits.inputs[5] ?? [];
    const res = await fetch(`http://127.0.0.1:${apiPort}/v1/models/digits/predict`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ features }),
    });
    expect(res.status).toBe(200);
    const [logits] = await referenceLogits("digits", "2", [features]);
    expect(((await res.json()) as { prediction: number }).prediction).toBe(argmax(logits ?? []));
    // an NDJSON batch: parsed on the API's parse thread, its rows run on the worker's threads,
    // each thread body loaded from the built output
    const batch = await fetch(`http://127.0.0.1:${apiPort}/v1/batches?model=digits`, {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: `${JSON.stringify({ key: "a", features })}\n${JSON.stringify({ key: "b", features })}\n`,
    });
    expect(batch.status).toBe(202);
    const { id } = (await batch.json()) as { id: string };
    await waitFor(async () => {
      const status = await fetch(`http://127.0.0.1:${apiPort}/v1/batches/${id}`);
      return ((await status.json()) as { status: string }).status === "completed";
    }, 30_000);
    const results = await (
      await fetch(`http://127.0.0.1:${apiPort}/v1/batches/${id}/results`)
    ).text();
    const lines = results
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { prediction: number });
    expect(lines.map((l) => l.prediction)).toEqual([argmax(logits ?? []), argmax(logits ?? [])]);
    for (const child of [api, worker]) child.kill("SIGTERM");
    expect(
      await Promise.all([api, worker].map((c) => new Promise((r) => c.once("exit", r)))),
    ).toEqual([0, 0]);
  }, 240_000);
});
