import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { type Proc, Stack, waitFor } from "./helpers/stack.js";

// The worker's test-only hook (apps/worker/src/test-crash.ts) kills it, as a crash of its
// runtime would, on a prompt that holds this marker. Short locks: a dead worker's jobs come
// back within seconds.
const POISON = "POISON-7f3a";
const stack = new Stack({
  workers: 0,
  env: { WORKER_MODELS: "tiny-lm,digits" },
  workerEnv: { FERRY_TEST_CRASH_ON: POISON, LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" },
});

/** Workers that died on their own; each is replaced at once, as `npm start` restarts one. */
let crashes = 0;
let stopping = false;
function restartWhenDead(proc: Proc): void {
  void proc.exited.then(async () => {
    if (stopping) return;
    crashes++;
    // a replacement still starting when the file ends is killed by the stack's stop: expected
    const next = await stack.startWorker().catch((err: unknown) => {
      if (stopping) return undefined;
      throw err;
    });
    if (next) restartWhenDead(next);
  });
}

beforeAll(async () => {
  await stack.start();
  for (let i = 0; i < 2; i++) restartWhenDead(await stack.startWorker());
});
afterAll(async () => {
  stopping = true;
  await stack.stop();
});

interface JobView {
  status: string;
  error: { code: string; message: string } | null;
}

const submit = async (prompt: string, maxTokens: number) => {
  const res = await stack.post("/v1/jobs", {
    model: "tiny-lm",
    input: { prompt, max_tokens: maxTokens, ignore_eos: true },
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
};
const job = async (id: string) =>
  (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as JobView;
const ended = (id: string) =>
  waitFor(async () => ["succeeded", "failed"].includes((await job(id)).status), 60_000).then(() =>
    job(id),
  );
const predict = () =>
  stack.post("/v1/models/digits/predict", { features: samples.digits.inputs[0] });

describe("a request that crashes its worker is failed, not handed on", () => {
  it("alone on its worker: one crash, the job fails with the reason, the neighbours are served", async () => {
    const before = crashes;
    const poison = await submit(`Tell me about ${POISON}`, 8);
    const result = await ended(poison);
    expect(result.status).toBe("failed");
    expect(result.error?.message).toMatch(/this request crashed the worker that ran it/);
    expect(crashes - before).toBe(1);
    // the other models and the same model's other requests go on
    expect((await predict()).status).toBe(200);
    const neighbour = await ended(await submit("Once upon a time", 8));
    expect(neighbour.status).toBe("succeeded");
  }, 90_000);

  it("among other generations: at most two crashes, every other job answered, the poison failed", async () => {
    await waitFor(
      async () => stack.workers.filter((w) => w.child.exitCode === null).length >= 2,
      60_000,
    );
    const before = crashes;
    const innocents = await Promise.all(
      Array.from({ length: 6 }, (_, k) => submit(`Story ${k}: once upon a time`, 120)),
    );
    // every innocent running before the poison arrives
    await waitFor(
      async () => (await Promise.all(innocents.map(job))).every((j) => j.status === "running"),
      30_000,
    );
    const poison = await submit(`And then ${POISON}`, 8);
    const result = await ended(poison);
    expect(result.status).toBe("failed");
    expect(result.error?.message).toMatch(/this request crashed the worker that ran it/);
    for (const id of innocents) expect((await ended(id)).status).toBe("succeeded");
    expect(crashes - before).toBeGreaterThanOrEqual(1);
    expect(crashes - before).toBeLessThanOrEqual(2);
    expect((await predict()).status).toBe(200);
  }, 120_000);
});
