import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { OwnerShare } from "./owner-share.js";

const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
const share = new OwnerShare(redis, keys, 600);
beforeAll(async () => {
  await redis.ping();
});
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

const queue = "m.v1";
/** A job waiting in BullMQ's sense: in the queue's prioritized set. */
const waiting = (id: string) => redis.zadd(keys.bullPrioritized(queue), 1, id);

describe("OwnerShare", () => {
  it("holds a key to its share of the queue; another key has its own", async () => {
    for (const id of ["a1", "a2", "a3"]) {
      await share.take(queue, "a", id, 10, 0.3);
      await waiting(id);
    }
    await expect(share.take(queue, "a", "a4", 10, 0.3)).rejects.toMatchObject({
      code: "QUEUE_FULL",
      retryAfterS: 1,
      message: expect.stringMatching(
        /This key has 3 requests waiting for m.v1, the most one key may have there \(KEY_QUEUE_SHARE: 3 of its 10\)/,
      ),
    });
    await share.take(queue, "b", "b1", 10, 0.3);
  });

  it("a job no longer waiting (taken by a worker, cancelled) frees its place; a young one is kept", async () => {
    const set = keys.ownerQueued(queue, "c");
    const old = Date.now() - 10_000;
    // three older jobs: two still waiting, one taken by a worker since
    await redis.zadd(set, old, "c1", old + 1, "c2", old + 2, "c3");
    await waiting("c1");
    await waiting("c3");
    await share.take(queue, "c", "c4", 10, 0.4);
    expect(await redis.zrange(set, 0, -1)).toEqual(["c1", "c3", "c4"]);
    // c4's job is not in BullMQ yet, and young: it counts
    await expect(share.take(queue, "c", "c5", 10, 0.3)).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
    expect(await redis.ttl(set)).toBeGreaterThan(590);
  });

  it("a job a worker took, however young, frees its place at once: the share is of waiting jobs, not a rate", async () => {
    for (let round = 0; round < 5; round++)
      for (let k = 0; k < 3; k++) {
        const id = `e${round}-${k}`;
        await share.take(queue, "e", id, 10, 0.3);
        // taken at once: its hash exists, it is in no waiting set
        await redis.hset(`${keys.bullJobPrefix(queue)}${id}`, "name", "generate");
      }
    expect(await redis.zcard(keys.ownerQueued(queue, "e"))).toBeLessThanOrEqual(3);
  });

  it("a key's lowest-priority jobs fill only BATCH_QUEUE_SHARE of its share: its interactive ones keep room", async () => {
    const lowest = { share: 0.5 };
    for (const id of ["f1", "f2"]) {
      await share.take(queue, "f", id, 10, 0.5, lowest);
      await waiting(id);
    }
    await expect(share.take(queue, "f", "f3", 10, 0.5, lowest)).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(
        /This key has 2 requests waiting for m.v1 at priority 1-3 \(batch lines among them\); one key may have 2 there, the rest of its 5 kept/,
      ),
    });
    for (const id of ["f4", "f5", "f6"]) await share.take(queue, "f", id, 10, 0.5);
    await expect(share.take(queue, "f", "f7", 10, 0.5)).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
  });

  it("a job's turn counts its key's jobs of its group waiting before it: batch lines apart from the rest", async () => {
    const lowest = { share: 0.5 };
    const turns: number[] = [];
    for (const id of ["g1", "g2", "g3"]) {
      turns.push(await share.take(queue, "g", id, 20, 0.5, lowest));
      await waiting(id);
    }
    // the key's interactive jobs take turns among themselves, not behind its batch lines
    for (const id of ["g4", "g5"]) {
      turns.push(await share.take(queue, "g", id, 20, 0.5));
      await waiting(id);
    }
    expect(turns).toEqual([0, 1, 2, 0, 1]);
    // both groups count against the key's share together: 5 waiting of its 10
    for (const id of ["g6", "g7", "g8", "g9", "g10"]) await share.take(queue, "g", id, 20, 0.5);
    await expect(share.take(queue, "g", "g11", 20, 0.5)).rejects.toMatchObject({
      message: expect.stringMatching(/This key has 10 requests waiting for m.v1, the most/),
    });
  });

  it("counts each of many jobs sent at once exactly once", async () => {
    const tries = await Promise.allSettled(
      Array.from({ length: 20 }, (_, k) => share.take(queue, "d", `d${k}`, 20, 0.5)),
    );
    expect(tries.filter((t) => t.status === "fulfilled")).toHaveLength(10);
  });
});
