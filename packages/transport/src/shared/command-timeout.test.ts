import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { createFastFailRedis, type RedisClient } from "./connection.js";

// Real Redis, never mocked; the commands read a key nobody writes.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** Holds the event loop for `ms`, as parsing a flood of requests does. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // a long turn
  }
}

/** Sends XLEN, lets it be written, then holds the loop past the command timeout. */
async function answeredDuringALongTurn(redis: RedisClient) {
  if (redis.status !== "ready") await once(redis, "ready");
  const reply = redis.xlen("ferry-test-no-such-key").then(
    (n) => `answered ${n}`,
    (err: Error) => err.message,
  );
  await new Promise((resolve) => setImmediate(resolve)); // written
  busy(600);
  const out = await reply;
  redis.disconnect();
  return out;
}

describe("command timeouts count Redis' delay, not this process's", () => {
  it("a reply that came during a turn longer than the timeout is an answer, not a timeout", async () => {
    expect(await answeredDuringALongTurn(createFastFailRedis(url, { commandTimeout: 200 }))).toBe(
      "answered 0",
    );
  });
});
