import { connect } from "node:net";
import { type InferJob, type InferRow, type RowResult, WIRE_VERSION } from "@ferry/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { waitFor } from "../../../../test/helpers/stack.js";
import { createRedis } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
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
