import { randomUUID } from "node:crypto";
import { once } from "node:events";
import type { Job } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { WorkerRegistry } from "../shared/worker-registry.js";
import { CRASHED_WORKER, Custody } from "./custody.js";

// Real Redis (never mocked); the keys carry a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-custody-${randomUUID().slice(0, 8)}`);
const redis = createRedis(url);
const registry = new WorkerRegistry(redis, keys);
beforeAll(async () => {
  if (redis.status !== "ready") await once(redis, "ready");
});
afterAll(async () => {
  await deletePrefix(url, keys.prefix);
  redis.disconnect();
});

const intake = { pause: async () => {}, resume: () => {} };
const custody = new Custody(redis, keys, "here", registry, 60, intake);

/** A job as BullMQ hands one back after a stall: the fields Custody reads. */
function returned(id: string): Job {
  const fields = { queueName: "{m.v1}", id, attemptsStarted: 2, stalledCounter: 1 };
  return fields as unknown as Job;
}

/** What Custody does with a job that was on `holder`, holding `held`, when it stalled. */
async function outcome(id: string, holder: string, held: string[]) {
  await redis.set(keys.custody({ queue: "m.v1", id }), `${holder} ${id} 1`);
  await redis.sadd(keys.holding(holder), ...held.map((h) => `m.v1 ${h}`));
  let ran = false;
  const refused = await custody
    .run(
      returned(id),
      async () => {
        ran = true;
      },
      async (message) => {
        throw new Error(message);
      },
    )
    .then(
      () => undefined,
      (err: Error) => err.message,
    );
  return { ran, refused };
}

describe("a job back from a worker that stopped during its run", () => {
  it("alone on a worker that beats no more: refused as the cause", async () => {
    expect(await outcome("a", "dead-1", ["a"])).toEqual({ ran: false, refused: CRASHED_WORKER });
  });

  it("one of several there: run again (alone), not refused", async () => {
    expect(await outcome("b", "dead-2", ["b", "c"])).toEqual({ ran: true, refused: undefined });
  });

  it("alone on a worker that still beats (it lost the lock, not its life): run again", async () => {
    const beat = () => registry.beat({ id: "alive", queues: ["m.v1"], started_at: 0 });
    await beat();
    const beating = setInterval(() => void beat(), 500);
    try {
      expect(await outcome("d", "alive", ["d"])).toEqual({ ran: true, refused: undefined });
    } finally {
      clearInterval(beating);
    }
  }, 15_000);

  it("its record goes once its run ends here", async () => {
    await outcome("e", "dead-3", ["e", "f"]);
    expect(await redis.exists(keys.custody({ queue: "m.v1", id: "e" }))).toBe(0);
    expect(await redis.sismember(keys.holding("here"), "m.v1 e")).toBe(0);
  });
});
