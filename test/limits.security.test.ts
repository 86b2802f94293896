import OpenAI, { PermissionDeniedError, toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { countKeys as countKeysUnder } from "./helpers/redis-keys.js";
import { ndjsonRows, samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";
import { endlessLine } from "./helpers/uploads.js";

// tiny-lm and mnist have no worker here (their jobs and batch rows stay queued), tiny-lm a
// small queue; streams are capped low.
const repo = tempRepository({ digits: {}, mnist: {}, "tiny-lm": { max_queue_size: 20 } });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: {
    API_KEYS: "k1,k2",
    MAX_STREAMS: "5",
    MAX_STREAMS_PER_KEY: "3",
    MAX_BATCH_BODY_BYTES: String(4 * 1024 * 1024),
    FILE_STORAGE_PER_KEY_BYTES: String(3_000_000),
    BATCH_ROWS_PER_KEY_BYTES: String(8_000_000),
    // one key may fill a queue here (the share is test/batch-admission.test.ts's)
    KEY_QUEUE_SHARE: "1",
  },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const k1 = { Authorization: "Bearer k1" };
const k2 = { Authorization: "Bearer k2" };
const message = async (res: Response) =>
  ((await res.json()) as { error: { message: string } }).error.message;

/** Keys under this stack's prefix matching `pattern` (jobs stored, say). */
const countKeys = (pattern: string) => countKeysUnder(stack.prefix, pattern);

const ndjson = (body: ReadableStream<Uint8Array> | string) =>
  fetch(stack.url("/v1/batches?model=digits"), {
    method: "POST",
    headers: { ...k1, "content-type": "application/x-ndjson" },
    body,
    duplex: "half",
  } as RequestInit);

describe("NDJSON batch uploads are bounded while they stream", () => {
  it("a 30 MB line without a newline: 413 as soon as it passes the line limit", async () => {
    const started = performance.now();
    const res = await ndjson(endlessLine(30 * 1024 * 1024));
    expect(res.status).toBe(413);
    expect(await message(res)).toMatch(/line 1 exceeds 1048576 bytes/);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it("a body past MAX_BATCH_BODY_BYTES of valid lines: 413", async () => {
    const line = `${JSON.stringify({ key: "k", features: samples.digits.inputs[0] })}\n`;
    const res = await ndjson(line.repeat(Math.ceil((5 * 1024 * 1024) / line.length)));
    expect(res.status).toBe(413);
    expect(await message(res)).toMatch(/NDJSON body exceeds 4194304 bytes/);
  });

  it("a JSON body whose Content-Type merely mentions ndjson is held to MAX_BODY_BYTES, as JSON", async () => {
    // one check had streamed it as NDJSON (no JSON body limit), another parsed it whole as
    // JSON on the API's loop: 32 MB took 0.5 s, past any limit
    const pad = JSON.stringify({
      input_file_id: "file-none",
      endpoint: "/v1/completions",
      completion_window: "24h",
      pad: new Array(5_000_000).fill(1),
    });
    const res = await fetch(stack.url("/v1/batches"), {
      method: "POST",
      headers: { ...k1, "content-type": "application/json; x=ndjson" },
      body: pad,
    });
    expect(res.status).toBe(413);
  });
});

describe("prompts that cannot fit the model are refused before anything is queued", () => {
  it("sync, streamed and async: OpenAI's 400 with the token counts, and no job stored", async () => {
    const before = await countKeys("job-queue:*");
    const long = "x".repeat(300);
    for (const stream of [false, true]) {
      const res = await stack.post(
        "/v1/completions",
        { model: "tiny-lm", prompt: long, max_tokens: 10, stream },
        k1,
      );
      expect(res.status).toBe(400);
      expect(await message(res)).toBe(
        "This model's maximum context length is 256 tokens. However, you requested 310 tokens (300 in the prompt, 10 for the completion). Please reduce the length of the prompt or completion.",
      );
    }
    const fits = await stack.post(
      "/v1/completions",
      { model: "tiny-lm", prompt: "x".repeat(250), max_tokens: 10 },
      k1,
    );
    expect(fits.status).toBe(400); // 260 > 256: prompt and completion must fit together
    const huge = await stack.post(
      "/v1/jobs",
      { model: "tiny-lm", input: { prompt: "y".repeat(7 * 1024 * 1024) } },
      k1,
    );
    expect(huge.status).toBe(400);
    expect(await message(huge)).toMatch(/maximum context length is 256 tokens/);
    expect(await countKeys("job-queue:*")).toBe(before);
  });

  it("stop sequences are capped in size", async () => {
    const res = await stack.post(
      "/v1/completions",
      { model: "tiny-lm", prompt: "Q:", stop: ["z".repeat(257)] },
      k1,
    );
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(/stop/);
  });
});

describe("open event streams are capped", () => {
  it("per key (429) and per process (503); a closed stream frees its slot", async () => {
    const job = await stack.post(
      "/v1/jobs",
      { model: "digits", input: { features: samples.digits.inputs[0] } },
      k1,
    );
    const { id } = (await job.json()) as { id: string };
    // a finished job's stream ends by itself; hold streams open on a queued generation instead
    const queued = await stack.post("/v1/jobs", { model: "tiny-lm", input: { prompt: "Q:" } }, k1);
    expect(queued.status).toBe(202);
    const qid = ((await queued.json()) as { id: string }).id;
    // each held stream keeps its Response: undici cancels the body of one that is garbage
    // collected, which closes its connection and gives the slot back mid-test
    const open: Array<{ abort: AbortController; res: Response }> = [];
    const follow = async (key: Record<string, string>, jobId = qid) => {
      const abort = new AbortController();
      const res = await fetch(stack.url(`/v1/jobs/${jobId}/events`), {
        headers: key,
        signal: abort.signal,
      });
      if (res.status === 200) open.push({ abort, res });
      else await res.body?.cancel();
      return res.status;
    };
    for (let i = 0; i < 100; i++) {
      const poll = await fetch(stack.url(`/v1/jobs/${id}`), { headers: k1 });
      if (((await poll.json()) as { status: string }).status === "succeeded") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await follow(k1, id)).toBe(200); // a finished job's stream ends: the slot comes back
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 3; i++) expect(await follow(k1)).toBe(200);
    expect(await follow(k1)).toBe(429);
    // k2 may not follow k1's job, so it holds streams on a job of its own
    const own = await stack.post("/v1/jobs", { model: "tiny-lm", input: { prompt: "A:" } }, k2);
    const k2job = ((await own.json()) as { id: string }).id;
    expect(await follow(k2, k2job)).toBe(200);
    expect(await follow(k2, k2job)).toBe(200);
    expect(await follow(k2, k2job)).toBe(503);
    for (const held of open.splice(0)) held.abort.abort();
    await new Promise((r) => setTimeout(r, 300));
    expect(await follow(k2, k2job)).toBe(200);
    for (const held of open) held.abort.abort();
  });
});

describe("max_queue_size holds for generators", () => {
  it("60 async completions at once against a queue of 20: 20 accepted, the rest 429", async () => {
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, k) =>
        stack.post(
          "/v1/jobs",
          { model: "tiny-lm", input: { prompt: `Q: ${k}?`, max_tokens: 4 } },
          k2,
        ),
      ),
    );
    // the stream test above left 2 completions queued
    const accepted = answers.filter((r) => r.status === 202).length;
    expect(accepted).toBe(18);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBe(42);
    expect(refused[0]?.headers.get("retry-after")).toBe("1");
  });
});

describe("deadlines are bounded", () => {
  it("a timeout_ms past an hour is a 400, not a timer that fires at once", async () => {
    const features = samples.digits.inputs[0];
    const v1 = await stack.post(
      "/v1/models/digits/predict",
      { features, timeout_ms: 2_147_483_648 },
      k1,
    );
    expect(v1.status).toBe(400);
    expect(await message(v1)).toMatch(/timeout_ms/);
    const v2 = await stack.post(
      "/v2/models/digits/infer",
      {
        inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }],
        parameters: { timeout_ms: 3_000_000_000 },
      },
      k1,
    );
    expect(v2.status).toBe(400);
  });
});

describe("hostile inputs beside normal load", () => {
  // How much they cost normal requests (p99, RSS, event-loop delay) is measured by
  // `npm run bench -- hostile`; here: a predict sent while each hostile input is being
  // refused is still answered, and the API stays up.
  it("a predict is answered while a 30 MB line, a 7 MB prompt and 100k-deep data are refused", async () => {
    const prompt = JSON.stringify({ model: "tiny-lm", prompt: "p".repeat(7_000_000) });
    const deep = `{"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","data":${"[".repeat(100_000)}1${"]".repeat(100_000)}}]}`;
    const post = (path: string, body: string) =>
      fetch(stack.url(path), {
        method: "POST",
        headers: { ...k1, "content-type": "application/json" },
        body,
      });
    const [line, big, nested, predict] = await Promise.all([
      ndjson(endlessLine(30 * 1024 * 1024)),
      post("/v1/completions", prompt),
      post("/v2/models/digits/infer", deep),
      stack.post("/v1/models/digits/predict", { features: samples.digits.inputs[9] }, k2),
    ]);
    // (the deep data is 100,000 lists: weighed past digits' largest body, refused unparsed)
    expect([line.status, big.status, nested.status, predict.status]).toEqual([413, 400, 413, 200]);
  });
});

describe("what one key keeps stored is bounded", () => {
  const openai = (apiKey: string) =>
    new OpenAI({ baseURL: stack.url("/v1"), apiKey, maxRetries: 0 });
  /** A batch input file of ~1.2 MB: digits predict lines. */
  const inputFile = () =>
    toFile(
      Buffer.from(
        Array.from(
          { length: 5_000 },
          (_, k) =>
            `${JSON.stringify({ custom_id: `c${k}`, method: "POST", url: "/v1/models/digits/predict", body: { features: samples.digits.inputs[k % 10] } })}\n`,
        ).join(""),
      ),
      "in.jsonl",
    );

  it("uploads past FILE_STORAGE_PER_KEY_BYTES: 403 quota_exceeded through the openai client, another key unaffected, a delete frees room", async () => {
    const first = await openai("k1").files.create({ file: await inputFile(), purpose: "batch" });
    const second = await openai("k1").files.create({ file: await inputFile(), purpose: "batch" });
    expect(first.bytes + second.bytes).toBeGreaterThan(2_000_000);
    const files = await countKeys("file:*");
    const refused = await openai("k1")
      .files.create({ file: await inputFile(), purpose: "batch" })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(PermissionDeniedError);
    expect(refused).toMatchObject({ status: 403, code: "quota_exceeded" });
    expect((refused as Error).message).toMatch(/file storage is full/);
    expect(await countKeys("file:*")).toBe(files);
    // a body of unknown length (chunked) crossing what is left: refused where it crosses
    const chunked = await fetch(stack.url("/v1/files"), {
      method: "POST",
      headers: { ...k1, "content-type": "multipart/form-data; boundary=b" },
      body: streamOf(
        '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n',
        Buffer.from(await (await inputFile()).arrayBuffer()),
        "\r\n--b--\r\n",
      ),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(403);
    expect(await message(chunked)).toMatch(/file storage is full/);
    expect(await countKeys("file:*")).toBe(files);
    // k2 holds its own
    await openai("k2").files.create({ file: await inputFile(), purpose: "batch" });
    await openai("k1").files.delete(first.id);
    const third = await openai("k1").files.create({ file: await inputFile(), purpose: "batch" });
    expect(third.status).toBe("processed");
  });
});

describe("what one key's batches hold waiting to run is bounded", () => {
  /** `rows` NDJSON items for `model`, every one a different input. */
  const post = (key: Record<string, string>, model: string, body: string) =>
    fetch(stack.url(`/v1/batches?model=${model}`), {
      method: "POST",
      headers: { ...key, "content-type": "application/x-ndjson" },
      body,
    });

  it("rows no worker has run count against BATCH_ROWS_PER_KEY_BYTES (403 past it, nothing queued), another key unaffected, a completed batch gives its rows back", async () => {
    // 1,200 mnist rows are 3,763,200 bytes packed (784 FP32 features each, two chunks): two
    // fit k1's 8,000,000, a third's first chunk does not; no worker serves mnist here
    const mnist = ndjsonRows("mnist", 1_200);
    expect((await post(k1, "mnist", mnist)).status).toBe(202);
    expect((await post(k1, "mnist", mnist)).status).toBe(202);
    const chunks = await countKeys("batch-rows:*");
    const refused = await post(k1, "mnist", mnist);
    expect(refused.status).toBe(403);
    expect(await message(refused)).toMatch(
      /This key's batches are at their limit of rows still to run: its other batches hold \d+ bytes.*BATCH_ROWS_PER_KEY_BYTES/,
    );
    // refused at its first chunk: nothing of it was stored
    expect(await countKeys("batch-rows:*")).toBe(chunks);
    // k2's budget is its own
    expect((await post(k2, "mnist", mnist)).status).toBe(202);
    // 1,400 rows: three chunks, the third past k2's budget: refused, and the two it had queued
    // go with it (their rows too), so that k2 has the same room as before
    const rows = await countKeys("batch-rows:*");
    const crossing = await post(k2, "mnist", ndjsonRows("mnist", 1_400));
    expect(crossing.status).toBe(403);
    expect(await countKeys("batch-rows:*")).toBe(rows);
    expect((await post(k2, "mnist", mnist)).status).toBe(202);
    // 1,500 digits rows are 384,000 bytes: k1 has room for one while its mnist rows wait, and
    // for the next only once the first has run (its worker gives its rows back as it completes)
    const digits = ndjsonRows("digits", 1_500);
    const first = await post(k1, "digits", digits);
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    await waitFor(async () => {
      const res = await fetch(stack.url(`/v1/batches/${id}`), { headers: k1 });
      return ((await res.json()) as { status: string }).status === "completed";
    }, 30_000);
    // before it had run there was no room; once it has, the same upload is taken
    await waitFor(async () => (await post(k1, "digits", digits)).status === 202, 10_000);
  });
});

/** A body sent in pieces, with no length: chunked on the wire. */
function streamOf(...parts: Array<string | Buffer>): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(Buffer.from(part));
      controller.close();
    },
  });
}
