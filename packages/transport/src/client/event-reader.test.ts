import { randomBytes } from "node:crypto";
import type { JobEvent } from "@ferry/protocol";
import { afterAll, describe, expect, it } from "vitest";
import { ChannelMux } from "../shared/channel-mux.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { EventWriter } from "../shared/event-log.js";
import { Keys } from "../shared/keys.js";
import { EventReader } from "./event-reader.js";

// Real Redis (never mocked), under a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(url);
const subscriber = createRedis(url);
afterAll(async () => {
  redis.disconnect();
  subscriber.disconnect();
  await deletePrefix(url, keys.prefix);
});

/**
 * A job whose log says it is running, followed by a reader that rechecks its log every 300 ms:
 * the events it passes on, and the read (it ends with the follow).
 */
async function followRunning(
  id: string,
): Promise<{ job: { queue: string; id: string }; seen: JobEvent[]; reading: Promise<void> }> {
  const reader = new EventReader(redis, new ChannelMux(subscriber), keys, 300);
  const writer = new EventWriter(redis, keys, 60);
  const job = { queue: "q", id };
  writer.emit(job, [{ type: "status", status: "running" }]);
  await writer.flush();
  const seen: JobEvent[] = [];
  const follow = await reader.open(job);
  const reading = (async () => {
    for await (const event of follow.events(undefined)) seen.push(event);
  })();
  return { job, seen, reading };
}

describe("EventReader", () => {
  it("a follow that heard nothing reads the log again: an event whose message was lost still arrives", async () => {
    const { job, seen, reading } = await followRunning("job-1");
    // appended to the log without its message, as when a shard subscriber was being replaced
    const started = Date.now();
    await redis.xadd(keys.events(job), "*", "e", JSON.stringify({ type: "done" }));
    await reading;
    expect(seen.map((e) => e.body.type)).toEqual(["status", "done"]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a follow whose log is gone (its job expired or was removed) ends rather than waits forever", async () => {
    const { job, seen, reading } = await followRunning("job-2");
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    // what its TTL does once the job kept its time
    await redis.del(keys.events(job));
    await reading;
    expect(seen.map((e) => e.body.type)).toEqual(["status"]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a reader resuming past the log's end (a Last-Event-ID never sent) ends with the job, not with the log's expiry", async () => {
    const reader = new EventReader(redis, new ChannelMux(subscriber), keys, 60_000);
    const writer = new EventWriter(redis, keys, 60);
    const job = { queue: "q", id: "job-3" };
    writer.emit(job, [{ type: "status", status: "running" }]);
    await writer.flush();
    const follow = await reader.open(job);
    const seen: JobEvent[] = [];
    const reading = (async () => {
      for await (const event of follow.events("999999999999999-0")) seen.push(event);
    })();
    await new Promise((r) => setTimeout(r, 100));
    writer.emit(job, [{ type: "done" }]);
    await writer.flush();
    // before, its `done` was dropped as already passed, and the read waited on; it is given,
    // or a client such as EventSource reconnects with the same id until the log expires
    await reading;
    expect(seen.map((e) => e.body.type)).toEqual(["done"]);
    // resumed past it once it has ended: the same
    const again: JobEvent[] = [];
    for await (const event of reader.read(job, "999999999999999-0")) again.push(event);
    expect(again.map((e) => e.body.type)).toEqual(["done"]);
    // resumed at it exactly: nothing (the client has it)
    const at: JobEvent[] = [];
    for await (const event of reader.read(job, again[0]?.id)) at.push(event);
    expect(at).toEqual([]);
  });

  it("a long log is replayed whole, in order and once, a page at a time", async () => {
    const writer = new EventWriter(redis, keys, 60);
    const job = { queue: "q", id: "job-4" };
    const tokens = Array.from({ length: 700 }, (_, k) => ({
      type: "token" as const,
      index: k,
      text: `t${k}`,
    }));
    writer.emit(job, [...tokens, { type: "done" }] as JobEvent["body"][]);
    await writer.flush();
    const reader = new EventReader(redis, new ChannelMux(subscriber), keys);
    const read = async (after?: string) => {
      const seen: JobEvent[] = [];
      for await (const event of reader.read(job, after)) seen.push(event);
      return seen;
    };
    const whole = await read();
    expect(whole.map((e) => (e.body as { text?: string }).text ?? e.body.type)).toEqual([
      ...tokens.map((t) => t.text),
      "done",
    ]);
    // resumed from the middle of the second page
    const rest = await read(whole[300]?.id);
    expect(rest.map((e) => e.id)).toEqual(whole.slice(301).map((e) => e.id));
  });
});
