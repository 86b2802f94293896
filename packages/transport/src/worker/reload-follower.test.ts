import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelMux } from "../shared/channel-mux.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { ControlChannel } from "../shared/control-channel.js";
import { Keys } from "../shared/keys.js";
import { followReloads } from "./reload-follower.js";

// Real Redis (never mocked); the keys and channels carry a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-follower-${randomUUID().slice(0, 8)}`);
const redis = createRedis(url);
const subscriber = createRedis(url);
beforeAll(async () => {
  await Promise.all(
    [redis, subscriber].map((c) => (c.status === "ready" ? undefined : once(c, "ready"))),
  );
});
afterAll(async () => {
  await deletePrefix(url, keys.prefix);
  redis.disconnect();
  subscriber.disconnect();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A follower on its own control channel whose reloads are recorded, listening before any model
 * serves, as a worker does from its first moment; `served` is what it serves.
 */
function follow(workerId: string, served: string[]) {
  const control = new ControlChannel(redis, new ChannelMux(subscriber), keys);
  const reloads: string[] = [];
  const outcome = (model: string) => ({ model, loaded: [], unchanged: [], failed: [] });
  const follower = followReloads(
    control,
    redis,
    keys,
    workerId,
    {
      reload: async (model) => {
        reloads.push(model);
        return outcome(model);
      },
      prepare: async (model) => outcome(model),
      decide: async () => false,
    },
    () => served,
  );
  let resubscribed = 0;
  control.onResubscribed(() => resubscribed++);
  /** Drops the subscriber's connection and waits for the follower's catch-up after it. */
  const reconnect = async () => {
    const before = resubscribed;
    subscriber.disconnect(true);
    for (let i = 0; i < 100 && resubscribed === before; i++) await sleep(50);
    expect(resubscribed).toBe(before + 1);
    await sleep(300); // the follower's generation read and catch-up
  };
  return { follower, reloads, reconnect };
}

describe("a worker's reload follower", () => {
  it("catches up after a resubscription only with a model whose generation moved meanwhile, also one that started serving after it began to listen", async () => {
    const served: string[] = [];
    const { follower, reloads, reconnect } = follow("w1", served);
    await redis.set(keys.generation("m"), "3");
    served.push("m");
    follower.serving("m");
    await sleep(200); // its generation read
    // nothing moved: before, a model that started serving after the listening began had no
    // generation on record, and every resubscription reloaded it, outside any consensus, from
    // whatever its files on disk were
    await reconnect();
    expect(reloads).toEqual([]);
    // moved while this worker was not listening (no broadcast heard): made up
    await redis.incr(keys.generation("m"));
    await reconnect();
    expect(reloads).toEqual(["m"]);
  });

  it("serves a model at the generation read before its files, so a reload committed while they loaded is made up", async () => {
    const served: string[] = [];
    const { follower, reloads, reconnect } = follow("w2", served);
    await redis.set(keys.generation("late"), "7");
    await follower.loading("late");
    // committed while the files load, its broadcast unheard (this worker's subscription down)
    await redis.incr(keys.generation("late"));
    served.push("late");
    follower.serving("late");
    await sleep(200);
    await reconnect();
    // read after the load instead, generation 8 was on record and nothing was made up
    expect(reloads).toEqual(["late"]);
  });
});
