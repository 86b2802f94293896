import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// One key may keep 2,000,000 bytes of files: its input file and its batches' answers.
const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "k1", FILE_STORAGE_PER_KEY_BYTES: "2000000" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

describe("an OpenAI batch's answers count against its key's file storage as they are kept", () => {
  it("past it the batch stops, failed, with the files of what it answered; the rest are batch_failed", async () => {
    // each cap on a line held, nothing held a batch's answers: 50,000 lines of many choices
    // with log probabilities could keep hundreds of GB from one 100 MB file
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "k1", maxRetries: 0 });
    const lines = Array.from({ length: 4_000 }, (_, k) => {
      const features = [...(samples.digits.inputs[k % 10] as number[])];
      features[0] = k / 4_000;
      return JSON.stringify({
        custom_id: `c${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features },
      });
    });
    const input = Buffer.from(`${lines.join("\n")}\n`);
    const file = await openai.files.create({
      file: await toFile(input, "in.jsonl"),
      purpose: "batch",
    });
    const batch = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/models/{model}/predict" as "/v1/chat/completions",
      completion_window: "24h",
    });
    await waitFor(
      async () => (await openai.batches.retrieve(batch.id)).status === "failed",
      60_000,
    );
    const failed = await openai.batches.retrieve(batch.id);
    expect(failed.errors?.data?.[0]?.message).toMatch(
      /This key's file storage is full: its files and its batches' answers hold \d+ bytes/,
    );
    const completed = failed.request_counts?.completed ?? 0;
    expect(completed).toBeGreaterThan(0);
    expect(completed).toBeLessThan(4_000);
    const output = (await (await openai.files.content(failed.output_file_id as string)).text())
      .trim()
      .split("\n");
    expect(output).toHaveLength(completed);
    const errors = (await (await openai.files.content(failed.error_file_id as string)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { error: { code: string } });
    expect(errors).toHaveLength(4_000 - completed);
    expect(errors.every((e) => e.error.code === "batch_failed")).toBe(true);
    // the answers it kept fit beside the input file (the error file's lines for those not run
    // are written whatever is left, as the files of any ended batch are)
    const outputBytes = (await openai.files.retrieve(failed.output_file_id as string)).bytes;
    expect(input.byteLength + outputBytes).toBeLessThanOrEqual(2_000_000);
    // its storage now full (its files), another batch is refused when it is created, not later
    const refused = await openai.batches
      .create({
        input_file_id: file.id,
        endpoint: "/v1/models/{model}/predict" as "/v1/chat/completions",
        completion_window: "24h",
      })
      .catch((err: unknown) => err);
    expect(refused).toMatchObject({ status: 403 });
    expect((refused as Error).message).toMatch(/is full \(\d+ of 2000000 bytes.*a batch's answers/);
  });
});
