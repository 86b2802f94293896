// The API's announcement of an interactive completion and the worker's reserve that acts on it:
// both sides of the transport, so here rather than beside either.
import { randomBytes } from "node:crypto";
import { deletePrefix, InferenceClient, WorkerTransport } from "@ferry/transport";
import { afterAll, describe, expect, it } from "vitest";
import { emptyCompletion, generateJob } from "./helpers/generate-jobs.js";
import { REDIS_URL, waitFor } from "./helpers/stack.js";

const prefix = `ferry-test-${randomBytes(4).toString("hex")}`;
afterAll(async () => {
  await deletePrefix(REDIS_URL, prefix);
});

const job = (prompt: string) => generateJob(prompt, "2");
const result = emptyCompletion;

describe("an interactive completion announced on its queue", () => {
  it("fetches an interactive completion an API queued at once, not at its next look; a batch line is not announced", async () => {
    const queue = "lm.v2";
    const transport = new WorkerTransport({ redisUrl: REDIS_URL, prefix: prefix });
    const api = new InferenceClient({ redisUrl: REDIS_URL, prefix: prefix });
    const started: string[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // its own look at the queue comes only after ten minutes: only the announcement can wake it
    transport.consumeGenerate(
      queue,
      {
        concurrency: 1,
        interactiveReserve: 1,
        interactivePeekMs: 600_000,
        lockDurationMs: 30_000,
        stalledIntervalMs: 30_000,
      },
      async (data) => {
        started.push(data.prompt);
        if (data.prompt.startsWith("line")) await held;
        return result;
      },
    );
    const submit = (prompt: string, priority: number) => {
      const { v: _v, kind: _k, accepted_at: _a, ...request } = job(prompt);
      return api.jobs.submitGenerate(
        { ...request, version: "2" },
        { priority, maxQueueSize: 100, owner: "" },
      );
    };
    try {
      await api.ready();
      await submit("line-1", 1);
      await waitFor(async () => started.length === 1, 5_000);
      // the reserve has looked once (nothing there) and sleeps; a second line is not announced
      await new Promise((r) => setTimeout(r, 300));
      await submit("line-2", 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(started).toEqual(["line-1"]);
      await submit("live", 5);
      await waitFor(async () => started.includes("live"), 5_000);
      expect(started).toEqual(["line-1", "live"]);
    } finally {
      release();
      await transport.close();
      await api.close();
    }
  }, 20_000);
});
