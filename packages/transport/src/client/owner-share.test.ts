import { randomBytes } from "node:crypto";
import { bullPriority } from "@ferry/protocol";
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
      await share.take(queue, "a", id, { maxQueueSize: 10, share: 0.3 });
      await waiting(id);
    }
    await expect(
      share.take(queue, "a", "a4", { maxQueueSize: 10, share: 0.3 }),
    ).rejects.toMatchObject({
      code: "QUEUE_FULL",
      retryAfterS: 1,
      message: expect.stringMatching(
        /This key has 3 requests waiting for m.v1, the most one key may have there \(KEY_QUEUE_SHARE: 3 of its 10\)/,
      ),
    });
    await share.take(queue, "b", "b1", { maxQueueSize: 10, share: 0.3 });
  });

  it("a job no longer waiting (taken by a worker, cancelled) frees its place; a young one is kept", async () => {
    const set = keys.ownerQueued(queue, "c");
    const old = Date.now() - 10_000;
    // three older jobs: two still waiting, one taken by a worker since
    await redis.zadd(set, old, "c1", old + 1, "c2", old + 2, "c3");
    await waiting("c1");
    await waiting("c3");
    await share.take(queue, "c", "c4", { maxQueueSize: 10, share: 0.4 });
    expect(await redis.zrange(set, 0, -1)).toEqual(["c1", "c3", "c4"]);
    // c4's job is not in BullMQ yet, and young: it counts
    await expect(
      share.take(queue, "c", "c5", { maxQueueSize: 10, share: 0.3 }),
    ).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
    expect(await redis.ttl(set)).toBeGreaterThan(590);
  });

  it("a job a worker took, however young, frees its place at once: the share is of waiting jobs, not a rate", async () => {
    for (let round = 0; round < 5; round++)
      for (let k = 0; k < 3; k++) {
        const id = `e${round}-${k}`;
        await share.take(queue, "e", id, { maxQueueSize: 10, share: 0.3 });
        // taken at once: its hash exists, it is in no waiting set
        await redis.hset(`${keys.bullJobPrefix(queue)}${id}`, "name", "generate");
      }
    expect(await redis.zcard(keys.ownerQueued(queue, "e"))).toBeLessThanOrEqual(3);
  });

  it("a key's lowest-priority jobs fill only BATCH_QUEUE_SHARE of its share: its interactive ones keep room", async () => {
    const lowestShare = 0.5;
    for (const id of ["f1", "f2"]) {
      await share.take(queue, "f", id, { maxQueueSize: 10, share: 0.5, lowestShare });
      await waiting(id);
    }
    await expect(
      share.take(queue, "f", "f3", { maxQueueSize: 10, share: 0.5, lowestShare }),
    ).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(
        /This key has 2 requests waiting for m.v1 at priority 1-3 \(batch lines among them\); one key may have 2 there, the rest of its 5 kept/,
      ),
    });
    for (const id of ["f4", "f5", "f6"])
      await share.take(queue, "f", id, { maxQueueSize: 10, share: 0.5 });
    await expect(
      share.take(queue, "f", "f7", { maxQueueSize: 10, share: 0.5 }),
    ).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
  });

  it("a job's turn is the one after its key's last still waiting at its priority, else the priority's first waiting one's", async () => {
    const q = "turns.v1";
    let arrival = 0;
    /** Job `id` as BullMQ keeps it waiting: in the prioritized set, scored by its priority. */
    const queued = (id: string, priority: number, turn: number) =>
      redis.zadd(keys.bullPrioritized(q), bullPriority(priority, turn) * 2 ** 32 + arrival++, id);
    /** Taken by a worker: out of the prioritized set, its hash there. */
    const taken = async (id: string) => {
      await redis.zrem(keys.bullPrioritized(q), id);
      await redis.hset(`${keys.bullJobPrefix(q)}${id}`, "name", "generate");
    };
    const take = async (owner: string, id: string, priority: number) => {
      const turn = await share.take(q, owner, id, { maxQueueSize: 100, share: 0.5, priority });
      await queued(id, priority, turn);
      return turn;
    };
    // one key's three in a row, then another key's first: it goes with the first key's first
    expect([await take("g", "g1", 5), await take("g", "g2", 5), await take("g", "g3", 5)]).toEqual([
      0, 1, 2,
    ]);
    expect(await take("h", "h1", 5)).toBe(0);
    // each priority its own turns: g's backlog at 5 does not put its 7 back
    expect(await take("g", "g4", 7)).toBe(0);
    // g1 and h1 ran: the priority's first waiting is g2 (turn 1); g's next follows g3, h's
    // next starts at the head, ahead of g3
    await taken("g1");
    await taken("h1");
    expect(await take("g", "g5", 5)).toBe(3);
    expect(await take("h", "h2", 5)).toBe(1);
    // a job whose add has not landed yet (no hash, in its key's set) still counts as waiting
    const unseen = await share.take(q, "i", "i1", { maxQueueSize: 100, share: 0.5, priority: 5 });
    expect(await share.take(q, "i", "i2", { maxQueueSize: 100, share: 0.5, priority: 5 })).toBe(
      unseen + 1,
    );
    // all ran: a key starts again at the head (none waiting: 0), not after its old turns
    for (const id of ["g2", "g3", "g5", "h2", "g4"]) await taken(id);
    await redis.zrem(keys.bullPrioritized(q), "i1", "i2");
    await redis.hset(`${keys.bullJobPrefix(q)}i1`, "name", "generate");
    await redis.hset(`${keys.bullJobPrefix(q)}i2`, "name", "generate");
    expect(await take("g", "g6", 5)).toBe(0);
    expect(await take("i", "i3", 5)).toBe(0);
    // its last one cancelled while an earlier one waits: the next still goes after that one
    expect([await take("k", "k1", 5), await take("k", "k2", 5)]).toEqual([0, 1]);
    await redis.zrem(keys.bullPrioritized(q), "k2");
    await redis.zrem(keys.ownerQueued(q, "k"), "k2");
    expect(await take("k", "k3", 5)).toBe(2);
  });

  it("batch lines count apart from a key's other jobs, and both against its share", async () => {
    const lowestShare = 0.5;
    for (const id of ["j1", "j2", "j3"]) {
      await share.take(queue, "j", id, { maxQueueSize: 20, share: 0.5, lowestShare, priority: 1 });
      await waiting(id);
    }
    for (const id of ["j4", "j5", "j6", "j7", "j8", "j9", "j10"])
      await share.take(queue, "j", id, { maxQueueSize: 20, share: 0.5 });
    await expect(
      share.take(queue, "j", "j11", { maxQueueSize: 20, share: 0.5 }),
    ).rejects.toMatchObject({
      message: expect.stringMatching(/This key has 10 requests waiting for m.v1, the most/),
    });
  });

  it("takes several jobs of one request all or none, their turns one after another", async () => {
    const q = "several.v1";
    const held = { maxQueueSize: 16, share: 0.5 };
    expect(await share.takeAll(q, "s", ["s1", "s2", "s3"], held)).toEqual([0, 1, 2]);
    // five more do not fit its eight: none is taken, and four still do
    await expect(
      share.takeAll(q, "s", ["t1", "t2", "t3", "t4", "t5", "t6"], held),
    ).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(
        /This request's 6 choices need 6 places among those one key may have waiting for several\.v1, and this key has 3 of its 8 taken/,
      ),
    });
    expect(await redis.zrange(keys.ownerQueued(q, "s"), 0, -1)).toEqual(["s1", "s2", "s3"]);
    // the next job follows the last of the three
    expect(await share.takeAll(q, "s", ["u1", "u2"], held)).toEqual([3, 4]);
    expect(await share.take(q, "s", "u3", held)).toBe(5);
    // more than the key may ever have waiting: not a refusal to retry
    await expect(
      share.takeAll(
        q,
        "v",
        Array.from({ length: 9 }, (_, k) => `v${k}`),
        held,
      ),
    ).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(
        /9 choices are more than one key may have waiting for several\.v1 \(8:/,
      ),
    });
  });

  it("a request of batch-line choices refused says which cap refused it", async () => {
    const q = "lines.v1";
    const held = { maxQueueSize: 20, share: 0.5 };
    const lines = { ...held, lowestShare: 0.5, priority: 1 };
    await share.takeAll(q, "w", ["w1", "w2", "w3", "w4"], lines);
    // its batch lines' own 5: four taken, two more do not fit there
    await expect(share.takeAll(q, "w", ["w5", "w6"], lines)).rejects.toMatchObject({
      message: expect.stringMatching(
        /need 2 places among the 5 one key may have waiting for lines\.v1 at priority 1-3, and this key has 4 taken/,
      ),
    });
    // room among its lines, but not among its 10 together
    await share.takeAll(q, "x", ["x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"], held);
    await expect(share.takeAll(q, "x", ["xl1", "xl2"], lines)).rejects.toMatchObject({
      message: expect.stringMatching(/need 2 places .*, and this key has 9 of its 10 taken/),
    });
  });

  it("counts each of many jobs sent at once exactly once", async () => {
    const tries = await Promise.allSettled(
      Array.from({ length: 20 }, (_, k) =>
        share.take(queue, "d", `d${k}`, { maxQueueSize: 20, share: 0.5 }),
      ),
    );
    expect(tries.filter((t) => t.status === "fulfilled")).toHaveLength(10);
  });
});
