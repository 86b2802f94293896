import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { STORE_CHUNK } from "./batch-job-consumer.js";

const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
const store = new LuaCommand<number>(redis, "ferryStoreChunkTest", 2, STORE_CHUNK);
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

describe("a chunk's answers stored by the worker", () => {
  it("count once in their batch, and never make again a batch record that expired", async () => {
    const live = keys.batch("b-live");
    await redis.hset(live, { status: "running" });
    await redis.expire(live, 600);
    const out = keys.batchChunkOut("b-live", 0);
    expect(await store.run(redis, out, live, 600, "answers", 3, 1)).toBe(4);
    expect(await store.run(redis, out, live, 600, "answers", 3, 1)).toBe(0);
    expect(await redis.hmget(live, "succeeded", "failed")).toEqual(["3", "1"]);

    // a retried chunk of a batch whose record is gone (its TTL passed)
    const gone = keys.batch("b-gone");
    await store.run(redis, keys.batchChunkOut("b-gone", 0), gone, 600, "answers", 2, 0);
    expect(await redis.exists(gone)).toBe(0);
    expect(await redis.ttl(keys.batchChunkOut("b-gone", 0))).toBeGreaterThan(0);
  });
});
