import { type GenerateJob, WIRE_VERSION } from "@ferry/protocol";
import { Job, Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../../scripts/free-port.js";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { createRedis } from "../shared/connection.js";
import { bullQueueName, Keys } from "../shared/keys.js";
import type { GenerateHandler } from "./handlers.js";
import { WorkerTransport } from "./worker-transport.js";

// A Redis of this file's own (killed and started again), a real WorkerTransport and BullMQ.
let server: OwnRedis;
beforeAll(async () => {
  server = await ownRedis();
});
afterAll(async () => {
  await server?.stop();
});

const TOKENS = 30;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A generator that sends token k as text "k " every 25 ms, and on a resumed attempt starts
 * after the ids the log already holds (as the engine does).
 */
const generate: GenerateHandler = async (_job, ctx) => {
  for (let k = ctx.resume.ids.length; k < TOKENS && !ctx.signal.aborted; k++) {
    await sleep(25);
    ctx.emit([{ type: "token", text: `${k} `, index: k, ids: [k] }]);
  }
  return {
    text: "",
    finish_reason: ctx.signal.aborted ? "cancelled" : "length",
    usage: { prompt_tokens: 1, completion_tokens: TOKENS, total_tokens: TOKENS + 1 },
    ttft_ms: 0,
  };
};

describe("GenerationConsumer when Redis refuses its appends for longer than they retry", () => {
  it("gives the job back to its queue, and its next attempt finishes the log: every token once, then the end", async () => {
    const prefix = "ferry-test";
    const transport = new WorkerTransport({ redisUrl: server.url, prefix, eventRetryMs: 300 });
    transport.consumeGenerate("lm.v1", { concurrency: 1 }, generate);
    const queue = new Queue(bullQueueName("lm.v1"), {
      connection: createRedis(server.url),
      prefix,
    });
    queue.on("error", () => {});
    const data: GenerateJob = {
      v: WIRE_VERSION,
      kind: "generate",
      model: "lm",
      version: "1",
      prompt: "p",
      params: {
        max_tokens: TOKENS,
        temperature: 0,
        top_p: 1,
        top_k: 0,
        stop: [],
        ignore_eos: true,
      },
      deadline: Date.now() + 120_000,
      accepted_at: Date.now(),
    };
    try {
      await queue.add("generate", data, { jobId: "job-1" });
      const log = createRedis(server.url);
      log.on("error", () => {});
      const key = new Keys(prefix).events({ queue: "lm.v1", id: "job-1" });
      // some tokens are in the log; then Redis refuses writes for longer than the appends
      // retry: it comes back as a replica of a primary that is gone (READONLY, as a failover's
      // stale slot map gets), until it is promoted
      while ((await log.xlen(key)) < 6) await sleep(20);
      log.disconnect();
      await server.kill();
      await server.start(["--replicaof", "127.0.0.1", String(await freePort())]);
      await sleep(1_200);
      const admin = createRedis(server.url);
      await admin.replicaof("NO", "ONE");
      admin.disconnect();
      const until = Date.now() + 30_000;
      let state = "";
      while (Date.now() < until) {
        state = await Job.fromId(queue, "job-1")
          .then((job) => job?.getState() ?? "gone")
          .catch(() => "");
        if (state === "completed" || state === "failed") break;
        await sleep(100);
      }
      expect(state).toBe("completed");
      // given back and taken again, not left to stall back after its lock lapsed
      const taken = await Job.fromId(queue, "job-1");
      expect([taken?.attemptsStarted, taken?.stalledCounter]).toEqual([2, 0]);
      const reader = createRedis(server.url);
      const events = (await reader.xrange(key, "-", "+")).map(
        ([, f]) => JSON.parse(f[1] ?? "{}") as { type: string; index?: number },
      );
      reader.disconnect();
      const tokens = events.filter((e) => e.type === "token").map((e) => e.index);
      expect(tokens).toEqual([...Array(TOKENS).keys()]);
      expect(events.at(-2)?.type).toBe("result");
      expect(events.at(-1)?.type).toBe("done");
      expect(events.filter((e) => e.type === "done")).toHaveLength(1);
    } finally {
      await transport.close();
      await queue.close();
    }
  }, 60_000);
});
