import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { RunningBatches } from "./running-batches.js";

const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
const running = new RunningBatches(redis, keys);
beforeAll(async () => {
  await redis.ping();
});
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

describe("RunningBatches", () => {
  it("seats `max` batches of an owner, renews a seat held, and frees one left", async () => {
    expect(await running.enter("a", "b1", 2, 10_000)).toBe(true);
    expect(await running.enter("a", "b2", 2, 10_000)).toBe(true);
    expect(await running.enter("a", "b3", 2, 10_000)).toBe(false);
    // another owner has seats of its own; a seat held is renewed, not refused
    expect(await running.enter("z", "b9", 2, 10_000)).toBe(true);
    expect(await running.enter("a", "b1", 2, 10_000)).toBe(true);
    await running.leave("a", "b1");
    expect(await running.enter("a", "b3", 2, 10_000)).toBe(true);
    expect(await running.count("a")).toBe(2);
    expect(await redis.ttl(keys.openAiBatchesRunning("a"))).toBeGreaterThan(0);
  });

  it("a runner that died holds its seat until its lease lapses", async () => {
    expect(await running.enter("c", "dead", 1, 100)).toBe(true);
    expect(await running.enter("c", "next", 1, 100)).toBe(false);
    await new Promise((r) => setTimeout(r, 150));
    expect(await running.count("c")).toBe(0);
    expect(await running.enter("c", "next", 1, 10_000)).toBe(true);
  });

  it("leases run on Redis's clock: a replica whose clock is a minute ahead does not unseat another's batch", async () => {
    expect(await running.enter("d", "held", 1, 10_000)).toBe(true);
    const ahead = Date.now() + 60_000;
    const clock = vi.spyOn(Date, "now").mockReturnValue(ahead);
    try {
      expect(await running.enter("d", "other", 1, 10_000)).toBe(false);
      expect(await running.count("d")).toBe(1);
    } finally {
      clock.mockRestore();
    }
  });
});
