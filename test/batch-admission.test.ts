import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack, waitFor } from "./helpers/stack.js";

// tiny-lm has no worker here: what is queued for it stays queued, and its queue holds 20.
const repo = tempRepository({ digits: {}, "tiny-lm": { max_queue_size: 20 } });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "k1,k2" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

describe("batch lines and interactive requests share a model's queue", () => {
  it("a batch's lines fill at most BATCH_QUEUE_SHARE (half) of max_queue_size: another key's requests are still taken", async () => {
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "k1", maxRetries: 0 });
    const lines = Array.from({ length: 60 }, (_, k) => ({
      custom_id: `c${k}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "tiny-lm", messages: [{ role: "user", content: `hi ${k}` }], max_tokens: 4 },
    }));
    const file = await openai.files.create({
      file: await toFile(
        Buffer.from(`${lines.map((l) => JSON.stringify(l)).join("\n")}\n`),
        "in.jsonl",
      ),
      purpose: "batch",
    });
    const batch = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    // its lines are queued (64 in flight at most; no worker takes them) up to their share, the
    // rest waiting out the refusals
    await waitFor(
      async () => (await openai.batches.retrieve(batch.id)).status === "in_progress",
      10_000,
    );
    await new Promise((r) => setTimeout(r, 1_500));
    const answers = await Promise.all(
      Array.from({ length: 15 }, (_, k) =>
        stack.post(
          "/v1/jobs",
          { model: "tiny-lm", input: { prompt: `Q: ${k}?`, max_tokens: 4 } },
          { Authorization: "Bearer k2" },
        ),
      ),
    );
    // the batch holds 10 of the 20; k2's interactive jobs get the other 10
    expect(answers.filter((r) => r.status === 202)).toHaveLength(10);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused).toHaveLength(5);
    expect(await refused[0]?.text()).toMatch(/is full \(20 waiting, limit 20\)/);
    await openai.batches.cancel(batch.id);
  }, 60_000);
});
