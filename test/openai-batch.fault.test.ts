import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });

/** A chat batch of `n` lines on tiny-lm, created; its custom_ids. */
async function chatBatch(n: number) {
  const lines = Array.from({ length: n }, (_, k) => ({
    custom_id: `line-${k}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: {
      model: "tiny-lm",
      messages: [{ role: "user", content: `Fortune ${k}, please.` }],
      max_tokens: 80,
    },
  }));
  const jsonl = `${lines.map((line) => JSON.stringify(line)).join("\n")}\n`;
  const file = await openai().files.create({
    file: await toFile(Buffer.from(jsonl), "input.jsonl"),
    purpose: "batch",
  });
  const batch = await openai().batches.create({
    input_file_id: file.id,
    endpoint: "/v1/chat/completions",
    completion_window: "24h",
  });
  return { id: batch.id, customIds: lines.map((line) => line.custom_id) };
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
  }, 180_000);
  const n = customIds.length;
  expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
  expect(done.error_file_id).toBeNull();
  const output = (await (await openai().files.content(done.output_file_id ?? "")).text())
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { custom_id: string; response: { status_code: number } });
  expect(output.map((line) => line.custom_id).sort()).toEqual([...customIds].sort());
  for (const line of output) expect(line.response.status_code).toBe(200);
}

describe("an OpenAI batch outlives the API process running it", () => {
  it("the API killed (SIGKILL) midway: a new API process finishes it, every custom_id exactly once", async () => {
    const N = 250;
    const { id, customIds } = await chatBatch(N);
    const before = await answered(id, 10);
    stack.api.child.kill("SIGKILL");
    await stack.api.exited;
    expect(before).toBeLessThan(N);
    await stack.startApi();
    await completedOnce(id, customIds);
    console.log(
      `batch of ${N}: ${before} answered when its API was killed, the rest by the next one`,
    );
  }, 300_000);

  it("the API stopped (SIGTERM) midway: it hands the batch back at once, the next API process finishes it", async () => {
    const N = 250;
    const { id, customIds } = await chatBatch(N);
    const before = await answered(id, 10);
    stack.api.child.kill("SIGTERM");
    await stack.api.exited;
    await stack.startApi();
    const ready = Date.now();
    // handed back: the next runner takes it at once, not once a lock has lapsed (15 s)
    const after = await answered(id, before + 1);
    const resumedMs = Date.now() - ready;
    expect(after).toBeGreaterThan(before);
    expect(resumedMs).toBeLessThan(10_000);
    await completedOnce(id, customIds);
  }, 300_000);
});
