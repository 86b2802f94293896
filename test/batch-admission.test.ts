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

describe("batch lines, interactive requests and keys share a model's queue", () => {
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
    await waitFor(
      async () => (await openai.batches.retrieve(batch.id)).status === "cancelled",
      20_000,
    );
    // k2's ten stay queued for the next test
  }, 60_000);

  it("one key's waiting jobs hold at most KEY_QUEUE_SHARE (half) of max_queue_size: another key's are still taken", async () => {
    // k2 holds 10 of tiny-lm's 20 from the test above (nothing runs them); more of k2's are
    // refused for its share, while k1's fill the rest of the queue
    const submit = (key: string, k: number) =>
      stack.post(
        "/v1/jobs",
        { model: "tiny-lm", input: { prompt: `Q: ${key} ${k}?`, max_tokens: 4 } },
        { Authorization: `Bearer ${key}` },
      );
    // (two seconds on: the API's count of the queue, taken while the batch's lines still
    // waited, is read again rather than trusted, and a line queued just before the cancel is
    // no longer counted as on its way)
    await new Promise((r) => setTimeout(r, 2_100));
    const more = await submit("k2", 0);
    expect(more.status).toBe(429);
    expect(more.headers.get("retry-after")).toBe("1");
    expect(await more.text()).toMatch(/This key has 10 requests waiting for tiny-lm.v1/);
    const theirs = await Promise.all(Array.from({ length: 12 }, (_, k) => submit("k1", k)));
    expect(theirs.filter((r) => r.status === 202)).toHaveLength(10);
    // a job that leaves the queue (cancelled) frees its key's place
    const [first] = (await Promise.all(
      theirs.filter((r) => r.status === 202).map((r) => r.json()),
    )) as Array<{ id: string }>;
    await fetch(stack.url(`/v1/jobs/${first?.id}`), {
      method: "DELETE",
      headers: { Authorization: "Bearer k1" },
    });
    await new Promise((r) => setTimeout(r, 2_100));
    expect((await submit("k1", 99)).status).toBe(202);
  }, 60_000);
});
