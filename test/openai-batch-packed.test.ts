import { Redis } from "ioredis";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { REDIS_URL, Stack, waitFor } from "./helpers/stack.js";

// A batch input file of plain predict lines (features alone) is packed as it uploads and run
// from its rows, unparsed; a line with anything more runs as it was sent. Both must answer as
// the predict route does, line for line.
const stack = new Stack({ env: { WORKER_MODELS: "digits" } });
const redis = new Redis(REDIS_URL);
beforeAll(() => stack.start());
afterAll(async () => {
  redis.disconnect();
  await stack.stop();
});

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "none", maxRetries: 0 });

type Line = {
  custom_id: string;
  response: { status_code: number; body: Record<string, unknown> } | null;
};

/** Runs `lines` as a batch on /v1/models/{model}/predict; its file's id and answers by id. */
async function run(lines: object[]): Promise<{ file: string; answers: Map<string, Line> }> {
  const text = `${lines.map((line) => JSON.stringify(line)).join("\n")}\n`;
  const file = await openai().files.create({
    file: await toFile(Buffer.from(text), "in.jsonl"),
    purpose: "batch",
  });
  let batch = await openai().batches.create({
    input_file_id: file.id,
    endpoint: "/v1/models/{model}/predict" as "/v1/chat/completions",
    completion_window: "24h",
  });
  await waitFor(async () => {
    batch = await openai().batches.retrieve(batch.id);
    return batch.status === "completed";
  }, 60_000);
  const answers = new Map<string, Line>();
  for (const id of [batch.output_file_id, batch.error_file_id]) {
    if (!id) continue;
    for (const raw of (await (await openai().files.content(id)).text()).split("\n"))
      if (raw) {
        const line = JSON.parse(raw) as Line;
        answers.set(line.custom_id, line);
      }
  }
  return { file: file.id, answers };
}

describe("packed predict lines", () => {
  it("run from the rows the upload packed, answering line for line as lines run as sent", async () => {
    const rows = samples.digits.inputs;
    // several stored chunks (256 KiB each) of rows, every one a different input
    const body = (k: number) => ({
      features: (rows[k % rows.length] ?? []).map((v, i) => (i === k % 64 ? v + (k % 7) / 8 : v)),
    });
    const line = (k: number, extra: object = {}) => ({
      custom_id: `r${k}`,
      method: "POST",
      url: "/v1/models/digits/predict",
      body: { ...body(k), ...extra },
    });
    const plain = [
      ...Array.from({ length: 3_000 }, (_, k) => line(k)),
      {
        custom_id: "short",
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features: [1, 2] },
      },
      { custom_id: "nope", method: "POST", url: "/v1/models/nope/predict", body: body(1) },
    ];
    // the same requests with one more field (the batch path has no cache to skip): not plain
    const sent = plain.map((l) => ({ ...l, body: { ...l.body, cache: false } }));
    const packed = await run(plain);
    const unpacked = await run(sent);
    const packedKey = (file: string) => `${stack.prefix}:file-packed:{${file}}`;
    expect(await redis.hlen(packedKey(packed.file))).toBeGreaterThan(2);
    expect(await redis.hlen(packedKey(unpacked.file))).toBe(0);

    expect(packed.answers.size).toBe(plain.length);
    for (const { custom_id } of plain) {
      const a = packed.answers.get(custom_id);
      const b = unpacked.answers.get(custom_id);
      expect(a?.response?.status_code, custom_id).toBe(b?.response?.status_code);
      const { latency_ms: _a, ...answer } = a?.response?.body ?? {};
      const { latency_ms: _b, ...expected } = b?.response?.body ?? {};
      expect(answer, custom_id).toEqual(expected);
    }
    expect(packed.answers.get("short")?.response).toMatchObject({
      status_code: 400,
      body: { error: { message: "Expected 64 features, got 2" } },
    });
    expect(packed.answers.get("nope")?.response?.status_code).toBe(404);
    expect(packed.answers.get("r7")?.response?.body).toMatchObject({
      model_version: "2",
      source: "model",
    });
  });
});
