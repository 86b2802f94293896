import { request } from "node:http";
import type { RedisTarget } from "@ferry/transport";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack, waitFor } from "./stack.js";

// An OpenAI batch through the faults a deployment meets: its API killed or stopped midway,
// its worker killed midway, an API killed while a file uploads and while a batch is created.
// Each time every custom_id is answered exactly once and the counts add up. Short locks: a
// dead worker's lines come back within seconds. Run on one Redis
// (test/openai-batch.fault.test.ts) and on a local Redis Cluster
// (test/openai-batch.cluster.fault.test.ts), two files so that they run side by side.
const WORKER_ENV = { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" };

export function batchFaults(where: string, target: () => RedisTarget | undefined, lines: number) {
  describe(`an OpenAI batch through its faults (${where})`, () => {
    let stack: Stack;
    beforeAll(async () => {
      const redis = target();
      stack = new Stack({
        ...(redis ? { redis } : {}),
        env: { WORKER_MODELS: "tiny-lm" },
        workerEnv: WORKER_ENV,
      });
      await stack.start();
    });
    afterAll(() => stack?.stop());

    const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });

    /** A chat batch's JSONL: `n` lines on tiny-lm, each a different prompt. */
    const jsonlOf = (n: number, tag: string) =>
      `${Array.from({ length: n }, (_, k) =>
        JSON.stringify({
          custom_id: `${tag}-${k}`,
          method: "POST",
          url: "/v1/chat/completions",
          body: {
            model: "tiny-lm",
            messages: [{ role: "user", content: `Fortune ${k} of ${tag}, please.` }],
            max_tokens: 80,
          },
        }),
      ).join("\n")}\n`;
    const idsOf = (n: number, tag: string) => Array.from({ length: n }, (_, k) => `${tag}-${k}`);

    async function chatBatch(n: number, tag: string) {
      const file = await openai().files.create({
        file: await toFile(Buffer.from(jsonlOf(n, tag)), "input.jsonl"),
        purpose: "batch",
      });
      const batch = await openai().batches.create({
        input_file_id: file.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      });
      return { id: batch.id, customIds: idsOf(n, tag) };
    }

    /** How many lines of the batch are answered, once `atLeast` are. */
    async function answered(id: string, atLeast: number): Promise<number> {
      let done = 0;
      await waitFor(async () => {
        done = (await openai().batches.retrieve(id)).request_counts?.completed ?? 0;
        return done >= atLeast;
      }, 180_000);
      return done;
    }

    /** The batch, completed: every custom_id exactly once in its output, each answered 200. */
    async function completedOnce(id: string, customIds: string[]) {
      let done = await openai().batches.retrieve(id);
      await waitFor(async () => {
        done = await openai().batches.retrieve(id);
        return done.status === "completed";
      }, 240_000);
      const n = customIds.length;
      expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
      expect(done.error_file_id).toBeNull();
      const output = (await (await openai().files.content(done.output_file_id ?? "")).text())
        .split("\n")
        .filter((line) => line !== "")
        .map(
          (line) => JSON.parse(line) as { custom_id: string; response: { status_code: number } },
        );
      expect(output.map((line) => line.custom_id).sort()).toEqual([...customIds].sort());
      for (const line of output) expect(line.response.status_code).toBe(200);
    }

    it("the API killed (SIGKILL) midway: a new API process finishes it, every custom_id exactly once", async () => {
      const { id, customIds } = await chatBatch(lines, "api-kill");
      const before = await answered(id, 10);
      stack.api.child.kill("SIGKILL");
      await stack.api.exited;
      expect(before).toBeLessThan(lines);
      await stack.startApi();
      await completedOnce(id, customIds);
    }, 300_000);

    it("the API stopped (SIGTERM) midway: it hands the batch back at once, the next API process finishes it", async () => {
      const { id, customIds } = await chatBatch(lines, "api-stop");
      const before = await answered(id, 10);
      stack.api.child.kill("SIGTERM");
      await stack.api.exited;
      await stack.startApi();
      const ready = Date.now();
      // handed back: the next runner takes it at once, not once a lock has lapsed (15 s)
      const after = await answered(id, before + 1);
      expect(after).toBeGreaterThan(before);
      expect(Date.now() - ready).toBeLessThan(10_000);
      await completedOnce(id, customIds);
    }, 300_000);

    it("the worker killed (SIGKILL) midway: another worker finishes its lines, every custom_id exactly once", async () => {
      const { id, customIds } = await chatBatch(lines, "worker-kill");
      await answered(id, 10);
      const worker = stack.workers[stack.workers.length - 1];
      worker?.child.kill("SIGKILL");
      await worker?.exited;
      await stack.startWorker();
      await completedOnce(id, customIds);
    }, 300_000);

    it("the API killed while a file uploads and while a batch is created: the retries, with their Idempotency-Keys, make one file and one batch", async () => {
      const n = 40;
      const body = jsonlOf(n, "upload-kill");
      const boundary = "ferry-fault-boundary";
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="input.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`;
      const multipart = Buffer.from(`${head}${body}\r\n--${boundary}--\r\n`);
      const fileKey = `upload-${Date.now()}`;
      // half the body sent, then the API dies under it: the client sees its connection go
      const cut = await new Promise<string>((resolve) => {
        const req = request(stack.url("/v1/files"), {
          method: "POST",
          headers: {
            "content-type": `multipart/form-data; boundary=${boundary}`,
            "content-length": String(multipart.length),
            "idempotency-key": fileKey,
          },
        });
        req.on("error", (err) => resolve(err.message));
        req.on("response", (res) => resolve(`answered ${res.statusCode}`));
        req.write(multipart.subarray(0, multipart.length >> 1), () => {
          stack.api.child.kill("SIGKILL");
        });
      });
      expect(cut).not.toMatch(/^answered 2/);
      await stack.api.exited;
      await stack.startApi();
      const before = (await openai().files.list({ purpose: "batch" })).data.length;
      // a claim its dead API left answers 409 with Retry-After until it goes stale (30 s)
      const honoring409 = async (send: () => Promise<Response>): Promise<Response> => {
        const until = Date.now() + 60_000;
        for (;;) {
          const res = await send();
          if (res.status !== 409 || Date.now() > until) return res;
          await res.arrayBuffer();
          await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after")) * 1_000));
        }
      };
      const upload = () =>
        fetch(stack.url("/v1/files"), {
          method: "POST",
          headers: {
            "content-type": `multipart/form-data; boundary=${boundary}`,
            "idempotency-key": fileKey,
          },
          body: multipart,
        });
      const first = await honoring409(upload);
      expect(first.status).toBe(200);
      const file = (await first.json()) as { id: string; bytes: number };
      expect(file.bytes).toBe(Buffer.byteLength(body));
      const again = (await (await upload()).json()) as { id: string };
      expect(again.id).toBe(file.id);
      expect((await openai().files.list({ purpose: "batch" })).data.length).toBe(before + 1);
      // the create sent, and the API killed before its answer can be read: the retry finds it
      const batchKey = `create-${Date.now()}`;
      const create = () =>
        fetch(stack.url("/v1/batches"), {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": batchKey },
          body: JSON.stringify({
            input_file_id: file.id,
            endpoint: "/v1/chat/completions",
            completion_window: "24h",
          }),
        });
      const lost = create().catch(() => undefined);
      stack.api.child.kill("SIGKILL");
      await lost;
      await stack.api.exited;
      await stack.startApi();
      const created = await honoring409(create);
      expect(created.status).toBe(200);
      const batch = (await created.json()) as { id: string };
      const listed = (await openai().batches.list({ limit: 100 })).data.filter(
        (b) => b.input_file_id === file.id,
      );
      expect(listed.map((b) => b.id)).toEqual([batch.id]);
      await completedOnce(batch.id, idsOf(n, "upload-kill"));
    }, 300_000);
  });
}
