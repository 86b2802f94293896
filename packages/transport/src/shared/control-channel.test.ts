import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { parseControlMessage } from "@ferry/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelMux } from "./channel-mux.js";
import { createRedis } from "./connection.js";
import { ControlChannel } from "./control-channel.js";
import { Keys } from "./keys.js";

// Real Redis (never mocked); the channels carry a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-control-${randomUUID().slice(0, 8)}`);
const connections = [createRedis(url), createRedis(url), createRedis(url), createRedis(url)];
const [apiRedis, apiSubscriber, workerRedis, workerSubscriber] = connections as [
  ReturnType<typeof createRedis>,
  ReturnType<typeof createRedis>,
  ReturnType<typeof createRedis>,
  ReturnType<typeof createRedis>,
];
beforeAll(async () => {
  // a subscription sent while a connection still runs its ready check fails that check
  await Promise.all(connections.map((c) => (c.status === "ready" ? undefined : once(c, "ready"))));
});
afterAll(async () => {
  // a commit's marker, which the API's ServingState removes once the generation moves: none here
  await apiRedis.del(keys.reloadCommit("m"));
  for (const c of connections) c.disconnect();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a committed reload", () => {
  it("resolves once every worker has swapped, one slower to load than the wait for answers too", async () => {
    const api = new ControlChannel(apiRedis, new ChannelMux(apiSubscriber), keys);
    const workers = new ControlChannel(workerRedis, new ChannelMux(workerSubscriber), keys);
    const swappedAt: Record<string, number> = {};
    // two workers: "fast" loads at once; "slow" answers 1.2 s later, past the API's 1 s wait
    // for answers, and swaps once its load is done and the decision has come (margins of
    // hundreds of ms: test files run side by side on two cores)
    const unlisten = await workers.listen((message) => {
      if (message.type === "reload") {
        const outcome = { model: "m", loaded: ["1"], unchanged: [], failed: [], held: true };
        void workers.answerReload(message.reply, { ...outcome, worker: "fast" });
        setTimeout(() => {
          void workers.answerReload(message.reply, { ...outcome, worker: "slow" });
        }, 1_200);
      }
      if (message.type === "reload-decision" && message.commit) {
        swappedAt.fast = performance.now();
        void workers.answerSwapped(message.reply, "fast");
        setTimeout(() => {
          swappedAt.slow = performance.now();
          void workers.answerSwapped(message.reply, "slow");
        }, 400);
      }
    });
    const { answers, decide } = await api.requestReload("m", async () => ["fast", "slow"], {
      timeoutMs: 1_000,
    });
    expect(answers.map((a) => a.worker)).toEqual(["fast"]);
    await decide(true);
    const decided = performance.now();
    expect(swappedAt.slow).toBeDefined();
    expect(decided).toBeGreaterThanOrEqual(swappedAt.slow ?? Number.POSITIVE_INFINITY);
    unlisten();
  });

  it("a dropped one resolves at once", async () => {
    const api = new ControlChannel(apiRedis, new ChannelMux(apiSubscriber), keys);
    const heard: string[] = [];
    const unlisten = await new ChannelMux(workerSubscriber).listen(keys.configChannel, (raw) => {
      const message = parseControlMessage(raw);
      if (message?.type === "reload-decision") heard.push(String(message.commit));
    });
    const { decide } = await api.requestReload("m", async () => [], { timeoutMs: 10_000 });
    const t0 = performance.now();
    await decide(false);
    expect(performance.now() - t0).toBeLessThan(2_000); // not the 10 s wait
    await sleep(100);
    expect(heard).toContain("false");
    unlisten();
  });

  it("stops waiting for a worker once its heartbeat expired: a dead one does not hold the reload for the whole wait, twice", async () => {
    const api = new ControlChannel(apiRedis, new ChannelMux(apiSubscriber), keys);
    const workers = new ControlChannel(workerRedis, new ChannelMux(workerSubscriber), keys);
    // "dead" is still listed when the reload starts (its heartbeat not yet expired) and never
    // answers; it drops out of the list 300 ms in. "held" answers, holds, and dies before the
    // decision: its swap never comes.
    const unlisten = await workers.listen((message) => {
      if (message.type === "reload") {
        const outcome = { model: "m", loaded: ["1"], unchanged: [], failed: [] };
        void workers.answerReload(message.reply, { ...outcome, worker: "alive", held: true });
        void workers.answerReload(message.reply, { ...outcome, worker: "held", held: true });
      }
      if (message.type === "reload-decision" && message.commit)
        void workers.answerSwapped(message.reply, "alive");
    });
    const started = performance.now();
    let listed = ["alive", "dead", "held"];
    setTimeout(() => {
      listed = ["alive", "held"];
    }, 300);
    const { answers, decide } = await api.requestReload("m", async () => listed, {
      timeoutMs: 10_000,
      recheckMs: 100,
    });
    expect(answers.map((a) => a.worker).sort()).toEqual(["alive", "held"]);
    expect(performance.now() - started).toBeLessThan(3_000); // not the 10 s wait
    listed = ["alive"];
    const deciding = performance.now();
    await decide(true);
    expect(performance.now() - deciding).toBeLessThan(3_000);
    unlisten();
  });
});
