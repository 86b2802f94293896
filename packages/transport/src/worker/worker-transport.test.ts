import { connect, createServer, type Server, type Socket } from "node:net";
import {
  type GenerateJob,
  type InferJob,
  type InferRow,
  type RowResult,
  WIRE_VERSION,
} from "@ferry/protocol";
import { Job, Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { waitFor } from "../../../../test/helpers/stack.js";
import { ChannelMux } from "../shared/channel-mux.js";
import { createRedis } from "../shared/connection.js";
import { ControlChannel } from "../shared/control-channel.js";
import { bullQueueName, Keys } from "../shared/keys.js";
import { bandOf, ENTRY_FIELD } from "../shared/sync-lane.js";
import { WorkerTransport } from "./worker-transport.js";

// A Redis of this file's own: MONITOR sees every command its server runs, in order.
let server: OwnRedis;
beforeAll(async () => {
  server = await ownRedis();
});
afterAll(async () => {
  await server?.stop();
});

describe("WorkerTransport's sync lane, as a worker runs it", () => {
  it("an answer computed in the turn its row was read reaches Redis before the next read", async () => {
    const keys = new Keys("ferry-order");
    const queue = "m.v1";
    const transport = new WorkerTransport({ redisUrl: server.url, prefix: keys.prefix });
    // onnxruntime-node runs a session inside a setImmediate: an inline model's answer comes
    // one check phase after its row was read
    transport.consume(
      queue,
      { concurrency: 8, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
      (row: InferRow) =>
        new Promise<RowResult>((resolve) =>
          setImmediate(() =>
            resolve({
              rid: row.rid,
              ok: true,
              outputs: {},
              timing: { queue_ms: 0, compute_ms: 0, batch_size: 1 },
            }),
          ),
        ),
    );
    // the commands the server runs, in its order: the lane's appends, reads and answers
    // (MONITOR on a bare socket: its replies are lines, which ioredis' parser does not expect)
    const ran: string[] = [];
    const watcher = connect(Number(new URL(server.url).port), "127.0.0.1");
    let text = "";
    watcher.on("data", (chunk: Buffer) => {
      const lines = (text + chunk.toString("utf8")).split("\r\n");
      text = lines.pop() ?? "";
      for (const line of lines) {
        const name = /^\+[\d.]+ \[[^\]]*\] "(\w+)"/.exec(line)?.[1]?.toLowerCase();
        if (name === "xadd" || name === "xreadgroup" || name === "spublish") ran.push(name);
      }
    });
    watcher.write("MONITOR\r\n");
    const listener = createRedis(server.url);
    const channel = keys.reply("api-1");
    let answered = 0;
    listener.on("smessage", () => answered++);
    await listener.ssubscribe(channel);
    // groups appended as the API's lane producer appends them
    const sender = createRedis(server.url);
    const lane = keys.syncLane(queue, bandOf(5));
    try {
      // the worker is blocked in its first read
      await waitFor(async () => ran.includes("xreadgroup"), 5_000);
      for (let i = 0; i < 5; i++) {
        const job: InferJob = {
          v: WIRE_VERSION,
          kind: "infer",
          model: "m",
          version: "1",
          rows: [{ rid: `r${i}`, inputs: {}, deadline: Date.now() + 60_000 }],
          reply_to: channel,
          accepted_at: Date.now(),
        };
        const before = answered;
        const at = ran.length;
        await sender.xadd(lane, "*", ENTRY_FIELD, JSON.stringify(job));
        await waitFor(async () => answered > before, 5_000);
        await waitFor(async () => ran.slice(at).includes("xreadgroup"), 5_000);
        // what the worker wrote after it was handed the row: its answer, then its next read
        // (an answer held back a turn, as ioredis' auto-pipelining holds it, went after the read)
        expect(
          ran
            .slice(at)
            .filter((c) => c !== "xadd")
            .slice(0, 2),
        ).toEqual(["spublish", "xreadgroup"]);
      }
    } finally {
      await transport.close();
      watcher.destroy();
      for (const r of [listener, sender]) r.disconnect();
    }
  });
});

/**
 * A TCP proxy in front of `port` that, once a client sends a command naming `key`, holds what
 * the server sends that client until `meanwhile` has run; every other byte passes at once.
 */
async function holdingProxy(
  port: number,
  key: string,
  meanwhile: () => Promise<void>,
): Promise<{ url: string; held: () => boolean; close: () => void }> {
  let sighted = false;
  const sockets: Socket[] = [];
  const server: Server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    sockets.push(client, upstream);
    let holding: Buffer[] | undefined;
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      if (sighted || !chunk.includes(key)) return;
      sighted = true;
      holding = [];
      // the command has reached the server (and run: it was idle) before `meanwhile` starts
      setTimeout(() => {
        void meanwhile().finally(() => {
          for (const held of holding ?? []) client.write(held);
          holding = undefined;
        });
      }, 50);
    });
    upstream.on("data", (chunk: Buffer) => (holding ? holding.push(chunk) : client.write(chunk)));
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const proxyPort = typeof address === "object" && address ? address.port : 0;
  return {
    url: `redis://127.0.0.1:${proxyPort}`,
    held: () => sighted,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A job of each kind a cancel reaches while it runs, and how a worker takes it. */
const kinds = [
  {
    kind: "an async predict",
    queue: "m.v1",
    data: {
      v: WIRE_VERSION,
      kind: "infer",
      model: "m",
      version: "1",
      rows: [{ rid: "r0", inputs: {}, deadline: Date.now() + 600_000 }],
      accepted_at: Date.now(),
    } satisfies InferJob,
    // a fresh one reads the mark before it runs
    stalledOver: false,
    consume: (transport: WorkerTransport, queue: string, ran: () => void) =>
      transport.consume(
        queue,
        { concurrency: 1, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
        async (row: InferRow) => {
          ran();
          return {
            rid: row.rid,
            ok: true,
            outputs: {},
            timing: { queue_ms: 0, compute_ms: 0, batch_size: 1 },
          };
        },
      ),
  },
  {
    kind: "a completion that stalled over from another worker",
    queue: "lm.v1",
    data: {
      v: WIRE_VERSION,
      kind: "generate",
      model: "lm",
      version: "1",
      prompt: "p",
      params: { max_tokens: 4, temperature: 0, top_p: 1, top_k: 0, stop: [], ignore_eos: false },
      deadline: Date.now() + 600_000,
      accepted_at: Date.now(),
    } satisfies GenerateJob,
    // a fresh completion starts at once and is stopped by the mark's answer; one that stalled
    // over reads the mark (and its log) before it resumes
    stalledOver: true,
    consume: (transport: WorkerTransport, queue: string, ran: () => void) =>
      transport.consumeGenerate(queue, { concurrency: 1 }, async () => {
        ran();
        return {
          text: "",
          finish_reason: "length",
          usage: { prompt_tokens: 1, completion_tokens: 4, total_tokens: 5 },
          ttft_ms: 0,
        };
      }),
  },
];

describe("WorkerTransport's cancellable jobs", () => {
  it.each(kinds)(
    "$kind: a cancel told before the answer to the job's cancel-mark check still stops it",
    async ({ queue, data, stalledOver, consume }) => {
      const keys = new Keys(`ferry-cancel-race-${queue}`);
      const id = "job-1";
      const direct = createRedis(server.url);
      const subscriber = createRedis(server.url);
      const control = new ControlChannel(direct, new ChannelMux(subscriber), keys);
      let told = 0;
      await control.onCancel(() => told++);
      // The worker's read of the mark runs (and finds none); the cancel is made after it, and its
      // broadcast reaches the worker while the read's answer is still on its way.
      const proxy = await holdingProxy(
        Number(new URL(server.url).port),
        keys.cancelled(id),
        async () => {
          await control.cancel(direct.multi().set(keys.cancelled(id), "1", "EX", 60), id).exec();
          await waitFor(async () => told > 0, 5_000);
          // the worker's subscriber has it too by now (its own connection, never held)
          await new Promise((resolve) => setTimeout(resolve, 200));
        },
      );
      const jobs = new Queue(bullQueueName(queue), { connection: direct, prefix: keys.prefix });
      await jobs.add(data.kind, data, { jobId: id });
      // as BullMQ's stalled-job check marks a job it moves back to wait (its `stc` field)
      if (stalledOver) await direct.hset(`${keys.prefix}:${bullQueueName(queue)}:${id}`, "stc", 1);
      const transport = new WorkerTransport({ redisUrl: proxy.url, prefix: keys.prefix });
      let ran = 0;
      consume(transport, queue, () => ran++);
      try {
        let job: Job | undefined;
        await waitFor(async () => {
          job = await Job.fromId(jobs, id);
          return job?.finishedOn !== undefined;
        }, 10_000);
        expect(proxy.held()).toBe(true);
        expect(job?.failedReason).toMatch(/^CANCELLED/);
        expect(ran).toBe(0);
      } finally {
        await transport.close();
        await jobs.close();
        proxy.close();
        for (const r of [direct, subscriber]) r.disconnect();
      }
    },
  );
});

describe("a reload this worker did not hear", () => {
  it("is made up from the generation: on its broadcast, and when the worker is subscribed again", async () => {
    const keys = new Keys("ferry-missed-reload");
    const admin = createRedis(server.url);
    const transport = new WorkerTransport({ redisUrl: server.url, prefix: keys.prefix });
    const lock = { concurrency: 1, lockDurationMs: 30_000, stalledIntervalMs: 30_000 };
    const unused = async (): Promise<RowResult> => {
      throw new Error("no rows here");
    };
    transport.consume("m.v1", lock, unused);
    transport.consume("n.v1", lock, unused);
    const reloads: string[] = [];
    transport.onReload({
      reload: async (model) => {
        reloads.push(model);
        return { model, loaded: [], unchanged: ["1"], failed: [] };
      },
      prepare: async (model) => ({ model, loaded: [], unchanged: ["1"], failed: [] }),
      decide: async () => false,
    });
    try {
      const other = new ControlChannel(admin, new ChannelMux(admin), keys);
      await waitFor(async () => (await admin.pubsub("NUMSUB", keys.configChannel))[1] === 1, 5_000);
      // the broadcast that follows an accepted reload (the reload request itself was missed)
      const bump = admin.multi().incr(keys.generation("m"));
      await other.announce(bump, { v: WIRE_VERSION, type: "generation", model: "m" }).exec();
      await waitFor(async () => reloads.length === 1, 5_000);
      expect(reloads).toEqual(["m"]);
      // a reload accepted while this worker's subscription was down: request and broadcast lost
      await admin.incr(keys.generation("n"));
      await admin.client("KILL", "TYPE", "pubsub");
      await waitFor(async () => reloads.length === 2, 5_000);
      expect(reloads).toEqual(["m", "n"]);
      // once more, nothing moved: nothing is reloaded
      await admin.client("KILL", "TYPE", "pubsub");
      await new Promise((r) => setTimeout(r, 800));
      expect(reloads).toEqual(["m", "n"]);
    } finally {
      await transport.close();
      admin.disconnect();
    }
  });
});

describe("a cancel this worker did not hear", () => {
  it("stops the running job once the worker is subscribed again and finds its mark", async () => {
    const keys = new Keys("ferry-missed-cancel");
    const queue = "lm.v1";
    const id = "job-2";
    const direct = createRedis(server.url);
    const jobs = new Queue(bullQueueName(queue), { connection: direct, prefix: keys.prefix });
    const transport = new WorkerTransport({ redisUrl: server.url, prefix: keys.prefix });
    let started = false;
    let stopped = false;
    transport.consumeGenerate(queue, { concurrency: 1 }, async (_job, ctx) => {
      started = true;
      await new Promise<void>((resolve) => {
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
        setTimeout(resolve, 10_000);
      });
      stopped = ctx.signal.aborted;
      return {
        text: "",
        finish_reason: "length",
        usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 },
        ttft_ms: 0,
      };
    });
    try {
      const generate = kinds[1]?.data as GenerateJob;
      await jobs.add("generate", { ...generate, deadline: Date.now() + 600_000 }, { jobId: id });
      await waitFor(async () => started, 10_000);
      // the API's cancel: the mark is written, its broadcast lost to a dropped subscription
      await direct.set(keys.cancelled(id), "1", "EX", 60);
      await direct.client("KILL", "TYPE", "pubsub");
      await waitFor(async () => stopped, 5_000);
    } finally {
      await transport.close();
      await jobs.close();
      direct.disconnect();
    }
  });
});
