import { randomBytes } from "node:crypto";
import { bullPriority } from "@ferry/protocol";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it } from "vitest";
import { emptyCompletion, generateJob } from "../../../../test/helpers/generate-jobs.js";
import { REDIS_URL, waitFor } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { bullQueueName, Keys } from "../shared/keys.js";
import { WorkerTransport } from "./worker-transport.js";

const keys = new Keys(`ferry-reserve-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

const job = (prompt: string) => generateJob(prompt, "1");
const result = emptyCompletion;

describe("InteractiveReserve", () => {
  it("takes an interactive job while batch lines fill every slot, and leaves the next line queued", async () => {
    const queue = "lm.v1";
    const transport = new WorkerTransport({ redisUrl: REDIS_URL, prefix: keys.prefix });
    const started: Array<{ prompt: string; priority: number }> = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    transport.consumeGenerate(
      queue,
      { concurrency: 1, interactiveReserve: 1, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
      async (data, ctx) => {
        started.push({ prompt: data.prompt, priority: ctx.priority });
        if (data.prompt.startsWith("line")) await held;
        return result;
      },
    );
    const jobs = new Queue(bullQueueName(queue), { connection: redis, prefix: keys.prefix });
    try {
      await jobs.add("c", job("line-1"), { priority: bullPriority(1) });
      await jobs.add("c", job("line-2"), { priority: bullPriority(1) });
      await waitFor(async () => started.length === 1, 5_000);
      const live = await jobs.add("c", job("live"), { priority: bullPriority(5) });
      // it runs while line-1 still holds the only slot; line-2 waits for that slot
      await waitFor(async () => (await live.getState()) === "completed", 5_000);
      expect(started).toEqual([
        { prompt: "line-1", priority: 1 },
        { prompt: "live", priority: 5 },
      ]);
      release();
      await waitFor(async () => started.length === 3, 5_000);
      expect(started[2]?.prompt).toBe("line-2");
    } finally {
      release();
      await transport.close();
      await jobs.close();
    }
  }, 20_000);
});
