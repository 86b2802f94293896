import { once } from "node:events";
import { createServer } from "node:net";
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

describe("a Redis that stops answering still times out", () => {
  it("rejects a command no reply comes for, after the timeout", async () => {
    // a server that accepts connections and never answers anything (a frozen Redis)
    const server = createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const redis = createFastFailRedis(`redis://127.0.0.1:${port}`, {
      commandTimeout: 200,
      enableReadyCheck: false,
    });
    if (redis.status !== "ready") await once(redis, "ready");
    const started = Date.now();
    const out = await redis.xlen("k").then(
      () => "answered",
      (err: Error) => err.message,
    );
    expect(out).toBe("Command timed out");
    expect(Date.now() - started).toBeLessThan(1_000);
    redis.disconnect();
    server.close();
  });
});
