import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });

describe("an OpenAI batch outlives the API process running it", () => {
  it("the API killed (SIGKILL) midway: a new API process finishes it, every custom_id exactly once", async () => {
    const N = 250;
    const lines = Array.from({ length: N }, (_, k) => ({
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
    let before = 0;
    await waitFor(async () => {
      before = (await openai().batches.retrieve(batch.id)).request_counts?.completed ?? 0;
      return before >= 10;
    }, 60_000);
    stack.api.child.kill("SIGKILL");
    await stack.api.exited;
    expect(before).toBeLessThan(N);

    await stack.startApi();
    let done = await openai().batches.retrieve(batch.id);
    await waitFor(async () => {
      done = await openai().batches.retrieve(batch.id);
      return done.status === "completed";
    }, 180_000);
    expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
    expect(done.error_file_id).toBeNull();
    const output = (await (await openai().files.content(done.output_file_id ?? "")).text())
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { custom_id: string; response: { status_code: number } });
    expect(output.map((line) => line.custom_id).sort()).toEqual(
      lines.map((line) => line.custom_id).sort(),
    );
    for (const line of output) expect(line.response.status_code).toBe(200);
    console.log(
      `batch of ${N}: ${before} answered when its API was killed, the rest by the next one`,
    );
  }, 300_000);
});
