import { randomUUID } from "node:crypto";
import OpenAI, { toFile } from "openai";
import type { Batch } from "openai/resources/batches";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Two API keys: each is a tenant, and sees only its own files and batches.
const stack = new Stack({
  env: { WORKER_MODELS: "digits,tiny-lm,bert-fortunes" },
  apiEnv: { API_KEYS: "k1,k2" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const openai = (apiKey = "k1") => new OpenAI({ baseURL: stack.url("/v1"), apiKey, maxRetries: 0 });

interface OutputLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: Record<string, unknown> } | null;
  error: { code: string; message: string } | null;
}

/** A JSONL file of `lines` (a string is a line as it is). */
const jsonl = (lines: unknown[]) =>
  `${lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line))).join("\n")}\n`;

async function upload(lines: unknown[], apiKey = "k1", headers: Record<string, string> = {}) {
  const file = await toFile(Buffer.from(jsonl(lines)), "input.jsonl");
  return openai(apiKey).files.create({ file, purpose: "batch" }, { headers });
}

async function batchOf(lines: unknown[], endpoint: string, window = "24h") {
  const file = await upload(lines);
  return openai().batches.create({
    input_file_id: file.id,
    endpoint: endpoint as "/v1/chat/completions",
    completion_window: window as "24h",
    metadata: { test: "openai-batch" },
  });
}

const FINAL = ["completed", "failed", "expired", "cancelled"];

async function finished(id: string, timeoutMs: number): Promise<Batch> {
  let batch = await openai().batches.retrieve(id);
  await waitFor(async () => {
    batch = await openai().batches.retrieve(id);
    return FINAL.includes(batch.status);
  }, timeoutMs);
  return batch;
}

async function contentOf(id: string | null | undefined): Promise<OutputLine[]> {
  if (!id) return [];
  const text = await (await openai().files.content(id)).text();
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as OutputLine);
}

/** Every line of a finished batch's files, checked answered exactly once. */
async function answersOf(batch: Batch, customIds: string[]) {
  const output = await contentOf(batch.output_file_id);
  const errors = await contentOf(batch.error_file_id);
  const seen = [...output, ...errors].map((line) => line.custom_id);
  expect(seen.sort()).toEqual([...customIds].sort());
  expect(batch.request_counts?.total).toBe(customIds.length);
  expect(batch.request_counts?.completed).toBe(output.length);
  expect(batch.request_counts?.failed).toBe(errors.filter((line) => line.response).length);
  return { output, errors };
}

const chatBody = (k: number, maxTokens = 8) => ({
  model: "tiny-lm",
  messages: [{ role: "user" as const, content: `Tell me a fortune, number ${k}.` }],
  max_tokens: maxTokens,
  temperature: 0,
});
const chatLine = (k: number, maxTokens = 8) => ({
  custom_id: `chat-${k}`,
  method: "POST",
  url: "/v1/chat/completions",
  body: chatBody(k, maxTokens),
});

describe("the Batch API with the openai client", () => {
  it("runs a chat batch on tiny-lm: each answer is the chat route's, an invalid line in the error file", async () => {
    const lines = [
      ...Array.from({ length: 6 }, (_, k) => chatLine(k)),
      { custom_id: "bad", method: "POST", url: "/v1/chat/completions", body: { model: "tiny-lm" } },
    ];
    const created = await batchOf(lines, "/v1/chat/completions");
    expect(created).toMatchObject({
      object: "batch",
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { test: "openai-batch" },
      request_counts: { total: 7, completed: 0, failed: 0 },
    });
    expect(created.id).toMatch(/^batch_/);
    const batch = await finished(created.id, 60_000);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ total: 7, completed: 6, failed: 1 });
    for (const at of ["in_progress_at", "finalizing_at", "completed_at"] as const)
      expect(batch[at]).toBeGreaterThanOrEqual(batch.created_at);
    const { output, errors } = await answersOf(
      batch,
      lines.map((line) => line.custom_id),
    );
    for (const line of output) {
      expect(line.id).toMatch(/^batch_req_/);
      expect(line.error).toBeNull();
      expect(line.response?.status_code).toBe(200);
      const k = Number(line.custom_id.slice(5));
      const sync = await openai().chat.completions.create(chatBody(k));
      const body = line.response?.body as unknown as typeof sync;
      expect(body.object).toBe("chat.completion");
      expect(body.choices[0]?.message.content).toBe(sync.choices[0]?.message.content);
      expect(body.choices[0]?.finish_reason).toBe(sync.choices[0]?.finish_reason);
      // (the prefix cache's share of the prompt depends on what ran before)
      expect(body.usage?.completion_tokens).toBe(sync.usage?.completion_tokens);
      expect(body.usage?.prompt_tokens).toBe(sync.usage?.prompt_tokens);
    }
    const bad = errors.find((line) => line.custom_id === "bad");
    expect(bad?.response?.status_code).toBe(400);
    const syncError = await fetch(stack.url("/v1/chat/completions"), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer k1" },
      body: JSON.stringify({ model: "tiny-lm" }),
    });
    expect(syncError.status).toBe(400);
    expect(bad?.response?.body).toEqual(await syncError.json());
  });

  it("guides batch lines as the chat route does: a json_schema answer and a forced tool call valid by their schema, an unsupported keyword a 400 line naming its pointer", async () => {
    const reading = {
      type: "object",
      properties: {
        sensor: { type: "string", enum: ["a", "b"] },
        value: { type: "number", minimum: -40, maximum: 85.5 },
        count: { type: "integer", minimum: 1, maximum: 100_000 },
      },
      required: ["sensor", "value", "count"],
      additionalProperties: false,
    };
    const valid = (x: Record<string, unknown>) =>
      Object.keys(x).sort().join() === "count,sensor,value" &&
      ["a", "b"].includes(x.sensor as string) &&
      typeof x.value === "number" &&
      x.value >= -40 &&
      x.value <= 85.5 &&
      Number.isInteger(x.count) &&
      (x.count as number) >= 1 &&
      (x.count as number) <= 100_000;
    const guided = (k: number, extra: Record<string, unknown>) => ({
      custom_id: `guided-${k}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { ...chatBody(k, 120), temperature: 0.8, seed: k, ...extra },
    });
    const lines = [
      ...[0, 1, 2].map((k) =>
        guided(k, {
          response_format: { type: "json_schema", json_schema: { name: "r", schema: reading } },
        }),
      ),
      guided(3, {
        tools: [{ type: "function", function: { name: "record", parameters: reading } }],
        tool_choice: { type: "function", function: { name: "record" } },
      }),
      guided(4, {
        response_format: {
          type: "json_schema",
          json_schema: { name: "r", schema: { type: "array", uniqueItems: true } },
        },
      }),
    ];
    const batch = await finished((await batchOf(lines, "/v1/chat/completions")).id, 120_000);
    const { output, errors } = await answersOf(
      batch,
      lines.map((line) => line.custom_id),
    );
    expect(output.map((line) => line.custom_id).sort()).toEqual([
      "guided-0",
      "guided-1",
      "guided-2",
      "guided-3",
    ]);
    type Message = {
      content: string | null;
      tool_calls?: Array<{ function: { arguments: string } }>;
    };
    for (const line of output) {
      const body = line.response?.body as unknown as { choices: Array<{ message: Message }> };
      const message = body.choices[0]?.message ?? { content: null };
      const text = message.tool_calls?.[0]?.function.arguments ?? message.content ?? "";
      expect(valid(JSON.parse(text)), `${line.custom_id}: ${text}`).toBe(true);
    }
    const refused = errors.find((line) => line.custom_id === "guided-4");
    expect(refused?.response?.status_code).toBe(400);
    expect(JSON.stringify(refused?.response?.body)).toContain(
      "at /uniqueItems: keyword 'uniqueItems' is not supported",
    );
  });

  it("runs a predict batch on digits: each answer is the predict route's, a bad row in the error file", async () => {
    const rows = samples.digits.inputs.slice(0, 40);
    const lines = [
      ...rows.map((features, k) => ({
        custom_id: `row-${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features },
      })),
      {
        custom_id: "short",
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features: [1, 2] },
      },
      // its own deadline holds, as for a predict sent alone: past it, never computed (504)
      {
        custom_id: "hurried",
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features: rows[0], timeout_ms: 1 },
      },
    ];
    const created = await batchOf(lines, "/v1/models/digits/predict");
    const batch = await finished(created.id, 60_000);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ total: 42, completed: 40, failed: 2 });
    const { output, errors } = await answersOf(
      batch,
      lines.map((line) => line.custom_id),
    );
    for (const line of output) {
      const k = Number(line.custom_id.slice(4));
      const sync = (await (
        await stack.post(
          "/v1/models/digits/predict",
          { features: rows[k] },
          { authorization: "Bearer k1" },
        )
      ).json()) as Record<string, unknown>;
      const answer = line.response?.body ?? {};
      expect(answer.prediction).toBe(sync.prediction);
      expect(answer.scores).toEqual(sync.scores);
      expect(answer.model_version).toBe(sync.model_version);
    }
    const short = await stack.post(
      "/v1/models/digits/predict",
      { features: [1, 2] },
      { authorization: "Bearer k1" },
    );
    expect(errors[0]?.response?.status_code).toBe(short.status);
    expect(errors[0]?.response?.body).toEqual(await short.json());
    expect(errors[1]?.custom_id).toBe("hurried");
    expect(errors[1]?.response?.status_code).toBe(504);
  });

  it("runs /v1/completions and /v1/responses batches as their routes answer", async () => {
    const completion = {
      model: "tiny-lm",
      prompt: "Once upon a time",
      max_tokens: 8,
      temperature: 0,
    };
    const response = {
      model: "tiny-lm",
      input: "Tell me a fortune.",
      max_output_tokens: 8,
      temperature: 0,
    };
    const runs = [
      { endpoint: "/v1/completions", body: completion },
      { endpoint: "/v1/responses", body: response },
    ];
    for (const { endpoint, body } of runs) {
      const created = await batchOf(
        [{ custom_id: "one", method: "POST", url: endpoint, body }],
        endpoint,
      );
      const batch = await finished(created.id, 60_000);
      expect(batch.status).toBe("completed");
      const [line] = (await answersOf(batch, ["one"])).output;
      const sync = (await (
        await stack.post(endpoint, body, { authorization: "Bearer k1" })
      ).json()) as Record<string, unknown>;
      const answer = line?.response?.body ?? {};
      expect(answer.object).toBe(sync.object);
      if (endpoint === "/v1/completions")
        expect((answer.choices as Array<{ text: string }>)[0]?.text).toBe(
          (sync.choices as Array<{ text: string }>)[0]?.text,
        );
      else {
        // (each message has an id of its own)
        const texts = (r: Record<string, unknown>) =>
          (r.output as Array<{ content: Array<{ text: string }> }>).map((m) => m.content[0]?.text);
        expect(texts(answer)).toEqual(texts(sync));
        expect(answer.status).toBe(sync.status);
      }
    }
  });

  it("runs an embeddings batch: each answer is the embeddings route's", async () => {
    const inputs = ["A fool and his money", ["Never trust a", "computer you cannot lift"]];
    const lines = inputs.map((input, i) => ({
      custom_id: `e${i}`,
      method: "POST",
      url: "/v1/embeddings",
      body: { model: "bert-fortunes", input, encoding_format: "float" },
    }));
    const batch = await finished((await batchOf(lines, "/v1/embeddings")).id, 60_000);
    expect(batch.status).toBe("completed");
    const output = await contentOf(batch.output_file_id);
    expect(output).toHaveLength(2);
    for (const [i, input] of inputs.entries()) {
      const line = output.find((l) => l.custom_id === `e${i}`);
      const sync = await openai().embeddings.create({
        model: "bert-fortunes",
        input,
        encoding_format: "float",
      });
      const body = line?.response?.body as { data: Array<{ embedding: number[] }> } | undefined;
      const got = body?.data ?? [];
      expect(got).toHaveLength(sync.data.length);
      for (const [j, d] of sync.data.entries())
        for (const [k, x] of d.embedding.entries()) expect(got[j]?.embedding[k]).toBeCloseTo(x, 5);
    }
  });

  it("a predict batch on /v1/models/{model}/predict runs each line on the model its url names", async () => {
    const features = samples.digits.inputs[0];
    const lines = [
      { custom_id: "digits", method: "POST", url: "/v1/models/digits/predict", body: { features } },
      { custom_id: "lm", method: "POST", url: "/v1/models/tiny-lm/predict", body: { features } },
    ];
    const created = await batchOf(lines, "/v1/models/{model}/predict");
    const batch = await finished(created.id, 60_000);
    const { output, errors } = await answersOf(batch, ["digits", "lm"]);
    expect(output[0]?.custom_id).toBe("digits");
    expect(errors[0]?.response?.status_code).toBe(400);
    expect(JSON.stringify(errors[0]?.response?.body)).toMatch(/tiny-lm' is a generator/);
  });

  it("runs a file saved with a byte order mark", async () => {
    const first = { custom_id: "bom", method: "POST", url: "/v1/models/digits/predict" };
    const line = JSON.stringify({ ...first, body: { features: samples.digits.inputs[1] } });
    const created = await batchOf([`\ufeff${line}`], "/v1/models/digits/predict");
    const batch = await finished(created.id, 30_000);
    expect(batch.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    await answersOf(batch, ["bom"]);
  });

  it("cancels a batch midway: what ran is kept, the rest is cancelled, the counts add up", async () => {
    const lines = Array.from({ length: 300 }, (_, k) => chatLine(k, 120));
    const created = await batchOf(lines, "/v1/chat/completions");
    await waitFor(
      async () =>
        ((await openai().batches.retrieve(created.id)).request_counts?.completed ?? 0) >= 2,
      60_000,
    );
    const cancelling = await openai().batches.cancel(created.id);
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    const batch = await finished(created.id, 60_000);
    expect(batch.status).toBe("cancelled");
    expect(batch.cancelling_at).toBeGreaterThan(0);
    expect(batch.cancelled_at).toBeGreaterThanOrEqual(batch.cancelling_at ?? 0);
    const { output, errors } = await answersOf(
      batch,
      lines.map((line) => line.custom_id),
    );
    expect(output.length).toBeGreaterThanOrEqual(2);
    const notRun = errors.filter((line) => line.error?.code === "batch_cancelled");
    expect(notRun.length).toBeGreaterThan(0);
    expect(output.length + errors.length).toBe(300);
    // a finished batch cannot be cancelled again into another state
    expect((await openai().batches.cancel(created.id)).status).toBe("cancelled");
  }, 150_000);

  it("expires a batch at the end of its completion window, keeping what finished", async () => {
    const lines = Array.from({ length: 300 }, (_, k) => chatLine(k + 1_000, 120));
    const created = await batchOf(lines, "/v1/chat/completions", "3s");
    expect((created.expires_at ?? 0) - created.created_at).toBe(3);
    const batch = await finished(created.id, 60_000);
    expect(batch.status).toBe("expired");
    expect(batch.expired_at).toBeGreaterThanOrEqual(created.expires_at ?? 0);
    const { output, errors } = await answersOf(
      batch,
      lines.map((line) => line.custom_id),
    );
    const expired = errors.filter((line) => line.error?.code === "batch_expired");
    expect(expired.length).toBeGreaterThan(0);
    expect(expired[0]?.response).toBeNull();
    for (const line of output) expect(line.response?.status_code).toBe(200);
  }, 120_000);

  it("lists batches newest first, a page at a time", async () => {
    const page = await openai().batches.list({ limit: 2 });
    expect(page.data).toHaveLength(2);
    const next = await openai().batches.list({ limit: 2, after: page.data[1]?.id ?? "" });
    expect(next.data[0]?.id).not.toBe(page.data[0]?.id);
    expect(next.data[0]?.created_at ?? 0).toBeLessThanOrEqual(page.data[1]?.created_at ?? 0);
    const all: string[] = [];
    for await (const batch of openai().batches.list({ limit: 1 })) all.push(batch.id);
    expect(new Set(all).size).toBe(all.length);
    expect(all.length).toBeGreaterThanOrEqual(4);
  });
});

describe("files", () => {
  it("refuses an invalid line or a repeated custom_id at upload, naming its line", async () => {
    const refused = (lines: unknown[]) =>
      upload(lines).then(
        () => undefined,
        (err: unknown) => err as InstanceType<typeof OpenAI.APIError>,
      );
    const good = chatLine(1);
    const repeated = await refused([good, chatLine(2), good]);
    expect(repeated?.status).toBe(400);
    expect(repeated?.message).toMatch(/line 3 has custom_id "chat-1"/);
    const wrongUrl = await refused([good, { ...chatLine(2), url: "/v1/audio/speech" }]);
    expect(wrongUrl?.message).toMatch(/line 2 has url "\/v1\/audio\/speech"/);
    const notJson = await refused(["{"]);
    expect(notJson?.message).toMatch(/line 1 is not valid JSON/);
  });

  it("a file for another purpose is refused for its purpose, though the openai client sends the file first", async () => {
    // a fine-tuning file's lines are not batch lines: the purpose, read after them, is the answer
    const tuning = [{ messages: [{ role: "user", content: "hi" }] }];
    for (const purpose of ["fine-tune", "assistants"] as const) {
      const file = await toFile(Buffer.from(jsonl(tuning)), "train.jsonl");
      const err = await openai()
        .files.create({ file, purpose })
        .then(
          () => undefined,
          (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
        );
      expect(err?.status).toBe(400);
      expect(err?.message).toMatch(`purpose "${purpose}" is not supported by this server`);
    }
  });

  it("lists files newest first, those made within one second too", async () => {
    const made: string[] = [];
    for (let k = 0; k < 5; k++) made.push((await upload([chatLine(100 + k)])).id);
    const listed = await openai().files.list({ purpose: "batch", limit: 5 });
    expect(listed.data.map((f) => f.id)).toEqual(made.reverse());
  });

  it("keeps a file's bytes as sent, lists it, and deletes it", async () => {
    const file = await upload([chatLine(1), chatLine(2)]);
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "input.jsonl" });
    expect(file.bytes).toBe(Buffer.byteLength(jsonl([chatLine(1), chatLine(2)])));
    expect(await (await openai().files.content(file.id)).text()).toBe(
      jsonl([chatLine(1), chatLine(2)]),
    );
    expect((await openai().files.retrieve(file.id)).id).toBe(file.id);
    const listed = await openai().files.list({ purpose: "batch" });
    expect(listed.data.map((f) => f.id)).toContain(file.id);
    expect(await openai().files.delete(file.id)).toMatchObject({ id: file.id, deleted: true });
    await expect(openai().files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
  });

  it("refuses a batch whose lines' urls are not its endpoint", async () => {
    const file = await upload([chatLine(1)]);
    await expect(
      openai().batches.create({
        input_file_id: file.id,
        endpoint: "/v1/completions",
        completion_window: "24h",
      }),
    ).rejects.toMatchObject({ status: 400 });
  });
});

describe("tenants", () => {
  it("another API key can read neither the files nor the batches", async () => {
    const file = await upload([chatLine(1)]);
    const batch = await openai().batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    const other = openai("k2");
    await expect(other.files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.delete(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.retrieve(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.cancel(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      other.batches.create({
        input_file_id: file.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      }),
    ).rejects.toMatchObject({ status: 404 });
    expect((await other.files.list()).data.map((f) => f.id)).not.toContain(file.id);
    expect((await other.batches.list()).data.map((b) => b.id)).not.toContain(batch.id);
    const done = await finished(batch.id, 60_000);
    await expect(other.files.content(done.output_file_id ?? "")).rejects.toMatchObject({
      status: 404,
    });
  });

  it("one key runs BATCHES_RUNNING_PER_KEY (4) batches at once, the rest wait their turn, and another key's batch runs meanwhile", async () => {
    // five long chat batches of k1's: four run, the fifth waits (validating) for a seat
    const file = await upload(
      Array.from({ length: 200 }, (_, k) => ({
        ...chatLine(k + 5_000),
        body: { ...chatBody(k + 5_000, 120), ignore_eos: true },
      })),
    );
    const mine: Batch[] = [];
    for (let k = 0; k < 5; k++)
      mine.push(
        await openai().batches.create({
          input_file_id: file.id,
          endpoint: "/v1/chat/completions",
          completion_window: "24h",
        }),
      );
    const statuses = async () =>
      Promise.all(mine.map(async (b) => (await openai().batches.retrieve(b.id)).status));
    await waitFor(
      async () => (await statuses()).filter((s) => s === "in_progress").length === 4,
      20_000,
    );
    // a batch of k2's is not left behind them: it runs and ends while k1's fifth still waits
    const theirs = await upload(
      Array.from({ length: 5 }, (_, k) => ({
        custom_id: `d${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features: samples.digits.inputs[k] },
      })),
      "k2",
    );
    const other = await openai("k2").batches.create({
      input_file_id: theirs.id,
      endpoint: "/v1/models/digits/predict" as "/v1/chat/completions",
      completion_window: "24h",
    });
    let done = await openai("k2").batches.retrieve(other.id);
    await waitFor(async () => {
      done = await openai("k2").batches.retrieve(other.id);
      return FINAL.includes(done.status);
    }, 30_000);
    expect(done.status).toBe("completed");
    const now = await statuses();
    expect(now.filter((s) => s === "in_progress")).toHaveLength(4);
    expect(now.filter((s) => s === "validating")).toHaveLength(1);
    // a seat freed (one cancelled) goes to the one waiting
    const waiting = mine[now.indexOf("validating")];
    const first = mine[now.indexOf("in_progress")];
    await openai().batches.cancel(first?.id ?? "");
    await waitFor(
      async () => (await openai().batches.retrieve(waiting?.id ?? "")).status === "in_progress",
      20_000,
    );
    for (const b of mine) await openai().batches.cancel(b.id);
    for (const b of mine) expect((await finished(b.id, 60_000)).status).toBe("cancelled");
    // 64 lines in flight a batch listen on its stop signal: no "possible memory leak" warning
    expect(stack.api.output.join("")).not.toContain("MaxListenersExceededWarning");
  }, 150_000);
});

describe("Idempotency-Key", () => {
  it("a retried files.create or batches.create gets the same id, never a second one", async () => {
    const key = randomUUID();
    const lines = [chatLine(1)];
    const first = await upload(lines, "k1", { "Idempotency-Key": key });
    const { data: again, response } = await openai()
      .files.create(
        { file: await toFile(Buffer.from(jsonl(lines)), "input.jsonl"), purpose: "batch" },
        { headers: { "Idempotency-Key": key } },
      )
      .withResponse();
    expect(again.id).toBe(first.id);
    expect(response.headers.get("idempotent-replayed")).toBe("true");
    // the same key with another file is another request
    await expect(upload([chatLine(2)], "k1", { "Idempotency-Key": key })).rejects.toMatchObject({
      status: 422,
    });

    const batchKey = randomUUID();
    const params = {
      input_file_id: first.id,
      endpoint: "/v1/chat/completions" as const,
      completion_window: "24h" as const,
    };
    const batch = await openai().batches.create(params, {
      headers: { "Idempotency-Key": batchKey },
    });
    const retry = await openai().batches.create(params, {
      headers: { "Idempotency-Key": batchKey },
    });
    expect(retry.id).toBe(batch.id);
    const listed = (await openai().batches.list()).data.filter((b) => b.input_file_id === first.id);
    expect(listed).toHaveLength(1);
  });
});

describe("Ferry's own batches beside OpenAI's", () => {
  it("a {model, items} batch still runs on POST /v1/batches and reads on GET /v1/batches/{id}", async () => {
    const items = [{ key: "a", features: samples.digits.inputs[0] }];
    const res = await stack.post(
      "/v1/batches",
      { model: "digits", items },
      { authorization: "Bearer k1" },
    );
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    await waitFor(async () => {
      const status = (await (
        await fetch(stack.url(`/v1/batches/${id}`), { headers: { authorization: "Bearer k1" } })
      ).json()) as { status: string };
      return status.status === "completed";
    }, 30_000);
  });
});
