import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { countKeys, eachKey } from "./helpers/redis-keys.js";
import { Stack, waitFor } from "./helpers/stack.js";

// tiny-lm's queue holds 8 here: one key may have 4 of it waiting (KEY_QUEUE_SHARE 0.5), its
// batch lines 2 of those (BATCH_QUEUE_SHARE 0.5), fewer than one line's choices.
const repo = tempRepository({ "tiny-lm": { max_queue_size: 8 } });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" },
  apiEnv: { API_KEYS: "k1" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

describe("a batch line of several choices past its key's share of the queue", () => {
  it("queues each choice once (the ones queued wait for the rest, none is run again), its log kept a minute", async () => {
    // a line refused midway used to run again whole, the choices that had run thrown away
    // (their event logs kept an hour): an 8 KB file of 24-choice lines put 2 GB in Redis
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "k1", maxRetries: 0 });
    const lines = Array.from({ length: 6 }, (_, k) => ({
      custom_id: `c${k}`,
      method: "POST",
      url: "/v1/completions",
      body: { model: "tiny-lm", prompt: `Once ${k}`, max_tokens: 2, n: 6 },
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
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await waitFor(
      async () => (await openai.batches.retrieve(batch.id)).status === "completed",
      60_000,
    );
    const done = await openai.batches.retrieve(batch.id);
    expect(done.request_counts).toMatchObject({ total: 6, completed: 6, failed: 0 });
    const output = await (await openai.files.content(done.output_file_id as string)).text();
    const answers = output
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { response: { body: { choices: unknown[] } } });
    expect(answers.every((a) => a.response.body.choices.length === 6)).toBe(true);
    // one job a choice: 36, not one more
    expect(await countKeys(stack.prefix, "job-queue:*")).toBe(36);
    // each choice's event log outlives it a minute, not an hour: its runner has read it once
    const ttls: number[] = [];
    await eachKey(stack.prefix, "events:*", async (node, key) => {
      if (!key.endsWith(":applied")) ttls.push(await node.ttl(key));
    });
    expect(ttls.length).toBeGreaterThan(0);
    for (const ttl of ttls) expect(ttl > 0 && ttl <= 60).toBe(true);
  });
});
