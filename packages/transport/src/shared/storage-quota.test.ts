import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "./connection.js";
import { Keys } from "./keys.js";
import { StorageQuota } from "./storage-quota.js";

const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
const quota = new StorageQuota(redis, keys);
beforeAll(async () => {
  await redis.ping();
});
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

const now = () => Math.floor(Date.now() / 1000);
const limits = { maxBytes: 1_000, maxItems: 3 };

describe("StorageQuota", () => {
  it("grows a thing by what is added, all of it or none, and settles it as a file in one step", async () => {
    const open = { maxBytes: 1_000, maxItems: 0 };
    await quota.reserve("g", "upload", 300, now() + 60, limits);
    await quota.grow("g", "answers", 400, now() + 60, open);
    await quota.grow("g", "answers", 200, now() + 60, open);
    expect(await quota.held("g", "answers")).toBe(600);
    // 200 more would pass 1,000 with the upload's 300: refused whole, nothing more held
    await expect(quota.grow("g", "answers", 200, now() + 60, open)).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
      message: expect.stringMatching(/files and its batches' answers hold 900 bytes, and 200 more/),
    });
    // the answers' hold is bytes, not a file: one file is counted
    expect(await quota.usage("g")).toEqual({ bytes: 900, items: 1 });
    await quota.reserve("g", "second", 50, now() + 60, { maxBytes: 1_000, maxItems: 2 });
    await quota.release("g", "second");
    // the batch's output file takes the answers' place
    await quota.settle("g", "output", 650, now() + 60, "answers");
    expect(await quota.usage("g")).toEqual({ bytes: 950, items: 2 });
    expect(await redis.zcard(keys.storageHolds("g"))).toBe(0);
    expect(await quota.held("g", "answers")).toBeUndefined();
  });

  it("drops what has expired before it counts, and lets its keys expire with what they hold", async () => {
    await quota.reserve("a", "old", 900, now() - 1, limits);
    // the expired reservation no longer counts: this one fits
    await quota.reserve("a", "new", 900, now() + 60, limits);
    expect(await quota.usage("a")).toEqual({ bytes: 900, items: 1 });
    const ttl = await redis.ttl(keys.storageHeld("a"));
    expect(ttl).toBeGreaterThan(50);
    expect(ttl).toBeLessThanOrEqual(60);
  });

  it("holds a thing again at its new size, settles a reservation in one step, and extends it", async () => {
    await quota.reserve("b", "f@1", 800, now() + 60, limits);
    await quota.reserve("b", "f@1", 1_000, now() + 60, limits);
    await expect(quota.reserve("b", "g@1", 1, now() + 60, limits)).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
    });
    await quota.settle("b", "f", 300, now() + 60, "f@1");
    expect(await quota.usage("b")).toEqual({ bytes: 300, items: 1 });
    await quota.extend("b", "f", now() + 3_600);
    expect(await redis.ttl(keys.storageExpiry("b"))).toBeGreaterThan(3_500);
    // extending what is not held holds nothing
    await quota.extend("b", "gone", now() + 3_600);
    expect(await quota.usage("b")).toEqual({ bytes: 300, items: 1 });
    await quota.release("b", "f");
    expect(await quota.usage("b")).toEqual({ bytes: 0, items: 0 });
  });

  it("refuses past the number of things, but not a thing already held", async () => {
    for (const id of ["x", "y", "z"]) await quota.reserve("c", id, 1, now() + 60, limits);
    await expect(quota.reserve("c", "w", 1, now() + 60, limits)).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
      message: expect.stringMatching(/holds 3 files/),
    });
    await quota.reserve("c", "x", 2, now() + 60, limits);
    expect(await quota.usage("c")).toEqual({ bytes: 4, items: 3 });
  });

  it("an upload growing past what is left is refused for its bytes, the key's other files named as they are", async () => {
    const two = { maxBytes: 1_000, maxItems: 2 };
    await quota.settle("e", "f", 300, now() + 60);
    // of unknown length: granted what is left
    expect(await quota.reserve("e", "u@1", 8_000, now() + 60, two, 1)).toBe(700);
    await expect(quota.reserve("e", "u@1", 1_400, now() + 60, two, 900)).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
      message: expect.stringMatching(
        /holds 300 bytes of files, and this upload needs room for 900 more/,
      ),
    });
    // its own reservation is still held, as it was
    expect(await quota.usage("e")).toEqual({ bytes: 1_000, items: 2 });
  });

  it("says whose storage is full: a key's, or the server's when it has no keys", async () => {
    await expect(
      quota.reserve("", "big", 2_000, now() + 60, { maxBytes: 1_000, maxItems: 0 }),
    ).rejects.toMatchObject({
      message: expect.stringMatching(
        /^This server's file storage \(one tenant: API_KEYS is unset\) is full/,
      ),
    });
    await expect(
      quota.reserve("k", "big", 2_000, now() + 60, { maxBytes: 1_000, maxItems: 0 }),
    ).rejects.toMatchObject({ message: expect.stringMatching(/^This key's file storage is full/) });
  });

  it("counts each of many uploads at once exactly once", async () => {
    const tries = await Promise.allSettled(
      Array.from({ length: 20 }, (_, k) =>
        quota.reserve("d", `u${k}`, 100, now() + 60, { maxBytes: 1_000, maxItems: 0 }),
      ),
    );
    expect(tries.filter((t) => t.status === "fulfilled")).toHaveLength(10);
    expect(await quota.usage("d")).toEqual({ bytes: 1_000, items: 10 });
  });
});
