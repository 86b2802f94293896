import type { ControlMessage } from "@ferry/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { createRedis, type RedisClient } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { InferenceClient } from "./inference-client.js";

// A redis-server of this file's own: the test drops every subscriber connection on it, which
// the shared one's other tests must never see.
const prefix = "ferry-test-resync";
const keys = new Keys(prefix);
let server: OwnRedis;
let admin: RedisClient;
let replica: InferenceClient;
const heard: ControlMessage[] = [];

beforeAll(async () => {
  server = await ownRedis();
  admin = createRedis(server.url);
  replica = new InferenceClient({ redisUrl: server.url, prefix });
  await replica.ready();
  replica.state.onConfigChange((message) => heard.push(message));
});

afterAll(async () => {
  await replica?.close();
  admin?.disconnect();
  await server?.stop();
});

async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("never held");
}

describe("a replica whose subscription was lost", () => {
  it("reads splits again and replays the reloads it missed once it is subscribed again", async () => {
    expect(await replica.state.getTraffic("m")).toBeNull();
    await replica.state.watchGenerations(["m", "n"]);
    expect(await replica.state.generation("m")).toBe(0);
    // what another replica's rollback and reload write, their broadcasts lost to this one
    await admin.hset(keys.traffic("m"), { "1": 100, "2": 0 });
    await admin.incr(keys.generation("n"));
    expect(await replica.state.getTraffic("m")).toBeNull(); // cached: nothing said otherwise
    await admin.client("KILL", "TYPE", "pubsub");
    await eventually(async () => (await replica.state.getTraffic("m")) !== null);
    expect(await replica.state.getTraffic("m")).toEqual({ "1": 100, "2": 0 });
    await eventually(async () => heard.some((m) => m.type === "generation" && m.model === "n"));
    expect(await replica.state.generation("n")).toBe(1);
    // a model whose generation did not move is not replayed
    expect(heard.filter((m) => m.model === "m")).toEqual([]);
  });
});
