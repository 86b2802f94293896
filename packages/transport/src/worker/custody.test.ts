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

/** The worker's intake: paused only for a solo run (nothing else taken meanwhile). */
let pauses = 0;
const intake = {
  pause: async () => {
    pauses++;
  },
  resume: () => {},
};
const custody = new Custody(redis, keys, { id: "here", startedAt: 1 }, registry, 60, intake);

/** A job as BullMQ hands one back after a stall: the fields Custody reads. */
function returned(id: string): Job {
  const fields = { queueName: "{m.v1}", id, attemptsStarted: 2, stalledCounter: 1 };
  return fields as unknown as Job;
}

/**
 * What Custody does with a job that was on `holder`, holding `held`, when it stalled; the
 * record counts `strikes` deaths before, and `progressed` says how far the cut run got.
 */
async function outcome(
  id: string,
  holder: string,
  held: string[],
  {
    strikes = 0,
    progressed,
    started,
  }: { strikes?: number; progressed?: boolean; started?: number } = {},
) {
  const record = `${holder} ${id} 1 ${strikes}${started === undefined ? "" : ` ${started}`}`;
  await redis.set(keys.custody({ queue: "m.v1", id }), record);
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
      progressed === undefined ? undefined : async () => progressed,
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

  it("alone, but it had got past taking its input in (a stream decoding): run again", async () => {
    const before = pauses;
    expect(await outcome("g", "dead-4", ["g"], { progressed: true })).toEqual({
      ran: true,
      refused: undefined,
    });
    // beside others: no solo run for it
    expect(pauses - before).toBe(0);
    expect(await outcome("h", "dead-5", ["h"], { progressed: false })).toEqual({
      ran: false,
      refused: CRASHED_WORKER,
    });
  });

  it("a second death during its runs: refused, alone or not, however far it got", async () => {
    expect(await outcome("i", "dead-6", ["i"], { strikes: 1, progressed: true })).toEqual({
      ran: false,
      refused: CRASHED_WORKER,
    });
    expect(await outcome("j", "dead-7", ["j", "k"], { strikes: 1 })).toEqual({
      ran: false,
      refused: CRASHED_WORKER,
    });
  });

  it("the run that goes on records the strike: its own death after would be the second", async () => {
    let seen: string | null = null;
    await redis.set(keys.custody({ queue: "m.v1", id: "l" }), "dead-8 l 1 0");
    await redis.sadd(keys.holding("dead-8"), "m.v1 l", "m.v1 m");
    await custody.run(
      returned("l"),
      async () => {
        seen = await redis.get(keys.custody({ queue: "m.v1", id: "l" }));
      },
      async (message) => {
        throw new Error(message);
      },
    );
    expect(seen).toMatch(/^here l \d+ 1 1$/);
  });

  it("one of several there: run again (alone), not refused", async () => {
    const before = pauses;
    expect(await outcome("b", "dead-2", ["b", "c"])).toEqual({ ran: true, refused: undefined });
    expect(pauses - before).toBe(1);
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

  it("alone on a worker whose id beats again from a new process (its container restarted in its pod): refused as the cause", async () => {
    const beat = () => registry.beat({ id: "restarted", queues: ["m.v1"], started_at: 9 });
    await beat();
    const beating = setInterval(() => void beat(), 500);
    try {
      expect(await outcome("n", "restarted", ["n"], { started: 5 })).toEqual({
        ran: false,
        refused: CRASHED_WORKER,
      });
      // the same process still beating: it lost the lock, not its life
      expect(await outcome("o", "restarted", ["o"], { started: 9 })).toEqual({
        ran: true,
        refused: undefined,
      });
    } finally {
      clearInterval(beating);
    }
  }, 15_000);

  it("a record of this worker's id from an earlier process of it: that process died", async () => {
    expect(await outcome("p", "here", ["p"], { started: 0 })).toEqual({
      ran: false,
      refused: CRASHED_WORKER,
    });
  });

  it("its record goes once its run ends here", async () => {
    await outcome("e", "dead-3", ["e", "f"]);
    expect(await redis.exists(keys.custody({ queue: "m.v1", id: "e" }))).toBe(0);
    expect(await redis.sismember(keys.holding("here"), "m.v1 e")).toBe(0);
  });
});
