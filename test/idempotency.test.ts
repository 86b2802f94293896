import { createHash, randomUUID } from "node:crypto";
import { request } from "node:http";
import { createRedis, IdempotencyStore, Keys } from "@ferry/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { readSse } from "./helpers/sse.js";
import { REDIS_TARGET, Stack } from "./helpers/stack.js";

// No worker: what a request creates stays queued, which is all a retry needs to find. Two API
// keys, and a second API replica on the same Redis and prefix.
const stack = new Stack({
  workers: 0,
  env: { WORKER_MODELS: "digits,tiny-lm" },
  apiEnv: { API_KEYS: "k1,k2" },
});
let replica = "";
beforeAll(async () => {
  await stack.start();
  replica = (await stack.startApiReplica()).url;
});
afterAll(() => stack.stop());

const redis = createRedis(REDIS_TARGET, { maxRetriesPerRequest: 1 });
afterAll(() => redis.disconnect());

const features = samples.digits.inputs[0] ?? [];
const job = (extra: Record<string, unknown> = {}) => ({
  model: "digits",
  input: { features },
  ...extra,
});
const post = (
  path: string,
  body: unknown,
  key: string | undefined,
  { apiKey = "k1", base = stack.baseUrl, type = "application/json" } = {},
) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: {
      "content-type": type,
      authorization: `Bearer ${apiKey}`,
      ...(key === undefined ? {} : { "Idempotency-Key": key }),
    },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
const idOf = async (res: Response) => ((await res.json()) as { id: string }).id;

/**
 * k1's claim on `key` as an upload leaves it when its answer was never stored: made before
 * the body was read (no fingerprint), pending, gone quiet (a retry takes it over).
 */
async function goneQuiet(key: string): Promise<void> {
  const tenant = createHash("sha256").update("k1").digest("hex").slice(0, 16);
  const at = new Keys(stack.prefix).idempotency(tenant, key);
  const rec = JSON.parse((await redis.get(at)) ?? "{}") as Record<string, unknown>;
  const quiet = { state: "pending", fp: "?", at: 0, since: rec.since, attempt: "gone" };
  await redis.set(at, JSON.stringify(quiet), "EX", 600);
}

/** Keys under this stack's prefix matching `pattern` (the stack's own Redis keys). */
async function keys(pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(
      cursor,
      "MATCH",
      `${stack.prefix}:${pattern}`,
      "COUNT",
      1000,
    );
    cursor = next;
    found.push(...batch);
  } while (cursor !== "0");
  return found;
}

describe("Idempotency-Key on POST /v1/jobs", () => {
  it("a retry gets the first answer back, marked replayed, and no second job", async () => {
    const before = (await keys("job-queue:*")).length;
    const key = randomUUID();
    const first = await post("/v1/jobs", job(), key);
    expect(first.status).toBe(202);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const id = await idOf(first);
    const retry = await post("/v1/jobs", job(), key);
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.headers.get("location")).toBe(`/v1/jobs/${id}`);
    expect(await idOf(retry)).toBe(id);
    // a replay is this request's answer too: it names this request, as every answer does
    const named = await fetch(`${stack.baseUrl}/v1/jobs`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: "Bearer k1",
        "Idempotency-Key": key,
        "X-Request-Id": "retry-7",
      },
      body: JSON.stringify(job()),
    });
    expect(named.headers.get("idempotent-replayed")).toBe("true");
    expect(named.headers.get("x-request-id")).toBe("retry-7");
    expect(await idOf(named)).toBe(id);
    // the same body with its keys in another order is the same request; a quoted key the same key
    const reordered = { input: { features }, model: "digits" };
    expect(await idOf(await post("/v1/jobs", reordered, `"${key}"`))).toBe(id);
    expect((await keys("job-queue:*")).length).toBe(before + 1);
    // without a key, every submit is a job of its own
    const a = await idOf(await post("/v1/jobs", job(), undefined));
    const b = await idOf(await post("/v1/jobs", job(), undefined));
    expect(a).not.toBe(b);
  });

  it("twenty retries racing: one job, every answer its id or a 409 to retry", async () => {
    const before = (await keys("job-queue:*")).length;
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post("/v1/jobs", job(), key)),
    );
    const ids = new Set<string>();
    for (const res of answers) {
      if (res.status === 409) {
        expect(res.headers.get("retry-after")).toBe("1");
        continue;
      }
      expect(res.status).toBe(202);
      ids.add(await idOf(res));
    }
    expect(ids.size).toBe(1);
    expect((await keys("job-queue:*")).length).toBe(before + 1);
  });

  it("the same key with another payload is a 422; a refused request keeps nothing", async () => {
    const key = randomUUID();
    expect((await post("/v1/jobs", job(), key)).status).toBe(202);
    const other = await post("/v1/jobs", job({ priority: 9 }), key);
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe(
      "idempotency_key_reused",
    );
    // a field the route does not read is still part of the payload (it was compared after the
    // schema had dropped it, and replayed); the same fields in another order are not
    expect((await post("/v1/jobs", job({ bogus: 1 }), key)).status).toBe(422);
    const { model, ...rest } = job();
    expect((await post("/v1/jobs", { ...rest, model }, key)).status).toBe(202);
    // a 400 (a wrong number of features) and a 404 (no such model) store nothing: the
    // corrected request goes through under the same key
    const fresh = randomUUID();
    expect((await post("/v1/jobs", job({ input: { features: [1, 2] } }), fresh)).status).toBe(400);
    expect((await post("/v1/jobs", job({ model: "nope" }), fresh)).status).toBe(404);
    expect((await post("/v1/jobs", job(), fresh)).status).toBe(202);
  });

  it("belongs to the API key that sent it", async () => {
    const key = randomUUID();
    const mine = await idOf(await post("/v1/jobs", job(), key, { apiKey: "k1" }));
    const theirs = await post("/v1/jobs", job(), key, { apiKey: "k2" });
    expect(theirs.status).toBe(202);
    expect(theirs.headers.get("idempotent-replayed")).toBeNull();
    expect(await idOf(theirs)).not.toBe(mine);
  });

  it("an API replica that died between the accept and the answer: another replica's retry finds its job", async () => {
    const key = randomUUID();
    const id = await idOf(await post("/v1/jobs", job(), key));
    const jobsBefore = (await keys("job-queue:*")).length;
    // what the dead replica leaves: its claim of the key written, its job queued, no answer
    const record = await findRecord(id);
    const { fp, since } = JSON.parse((await redis.get(record)) ?? "{}") as Record<string, string>;
    await redis.set(record, JSON.stringify({ state: "pending", fp, at: 0, since }));
    const retry = await post("/v1/jobs", job(), key, { base: replica });
    expect(retry.status).toBe(202);
    expect(await idOf(retry)).toBe(id);
    expect((await keys("job-queue:*")).length).toBe(jobsBefore);
    // and its answer is kept again for the next retry
    const again = await post("/v1/jobs", job(), key);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await idOf(again)).toBe(id);
  });

  it("a key used again once it expired is a new request: a new job, not the old one found again", async () => {
    const key = randomUUID();
    const first = await idOf(await post("/v1/jobs", job(), key));
    // IDEMPOTENCY_TTL_S passed: the key's record is gone, the job it made is not
    await redis.del(await findRecord(first));
    const later = await post("/v1/jobs", job({ priority: 7 }), key);
    expect(later.status).toBe(202);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
    const second = await idOf(later);
    expect(second).not.toBe(first);
    const stored = (await (
      await fetch(`${stack.baseUrl}/v1/jobs/${second}`, { headers: { authorization: "Bearer k1" } })
    ).json()) as { id: string };
    expect(stored.id).toBe(second);
  });

  it("a body nested 100,000 deep under a key is the same 400 as without one, never a 500", async () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const body = `{"model":"digits","input":{"features":${deep}}}`;
    for (const key of [undefined, randomUUID()]) {
      const res = await post("/v1/jobs", body, key);
      expect(res.status).toBe(400);
    }
  });

  it("rejects a key that is empty, too long or not visible ASCII", async () => {
    for (const key of ['""', "x".repeat(256), "caf\u00e9"]) {
      const res = await fetch(stack.url("/v1/jobs"), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: "Bearer k1",
          "Idempotency-Key": key,
        },
        body: JSON.stringify(job()),
      }).catch(() => undefined);
      // (undici refuses a header value outside Latin-1 itself; one it sends is a 400)
      if (res) expect(res.status).toBe(400);
    }
  });

  it("the OpenAPI document names it on every route that creates something", async () => {
    const doc = (await (await fetch(stack.url("/openapi.json"))).json()) as {
      paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }> }>>;
    };
    for (const path of ["/v1/jobs", "/v1/batches", "/v1/files", "/v1/responses"]) {
      const params = doc.paths[path]?.post?.parameters ?? [];
      expect(
        params.some((p) => p.in === "header" && p.name === "idempotency-key"),
        path,
      ).toBe(true);
    }
  });
});

describe("Idempotency-Key on POST /v1/batches", () => {
  const ndjson = (n: number, from = 0) =>
    Array.from({ length: n }, (_, i) => JSON.stringify({ key: `k${from + i}`, features })).join(
      "\n",
    );

  it("an NDJSON upload retried is the same batch; another body under the key is a 422", async () => {
    const key = randomUUID();
    const body = ndjson(50);
    const path = "/v1/batches?model=digits";
    const first = await post(path, body, key, { type: "application/x-ndjson" });
    expect(first.status).toBe(202);
    const id = await idOf(first);
    const retry = await post(path, body, key, { type: "application/x-ndjson" });
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await idOf(retry)).toBe(id);
    expect((await post(path, ndjson(50, 1), key, { type: "application/x-ndjson" })).status).toBe(
      422,
    );
  });

  it("a JSON batch retried is the same batch", async () => {
    const key = randomUUID();
    const body = { model: "digits", items: [{ key: "a", features }] };
    const id = await idOf(await post("/v1/batches", body, key));
    expect(await idOf(await post("/v1/batches", body, key))).toBe(id);
  });

  it("a retry while the first upload is still streaming in is a 409 with Retry-After", async () => {
    const key = randomUUID();
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const encoder = new TextEncoder();
    const slow = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(encoder.encode(`${ndjson(10)}\n`));
        await held;
        controller.enqueue(encoder.encode(ndjson(10, 10)));
        controller.close();
      },
    });
    const first = fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: {
        "content-type": "application/x-ndjson",
        authorization: "Bearer k1",
        "Idempotency-Key": key,
      },
      body: slow,
      duplex: "half",
    } as RequestInit);
    // the first has claimed the key once its body has begun to arrive
    let retry: Response | undefined;
    for (let i = 0; i < 50; i++) {
      retry = await post("/v1/batches?model=digits", ndjson(20), key, {
        type: "application/x-ndjson",
      });
      if (retry.status === 409) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(retry?.status).toBe(409);
    expect(retry?.headers.get("retry-after")).toBe("1");
    release();
    const done = await first;
    expect(done.status).toBe(202);
    expect(((await done.json()) as { total: number }).total).toBe(20);
    // the same 20 lines again are the same batch
    const replay = await post("/v1/batches?model=digits", `${ndjson(10)}\n${ndjson(10, 10)}`, key, {
      type: "application/x-ndjson",
    });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
  });
});

describe("Idempotency-Key on POST /v1/files", () => {
  const lines = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({
        custom_id: `c${i}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features },
      }),
    ).join("\n");
  /** A multipart upload's bytes and content type, as `fetch` would send them. */
  async function form(text: string): Promise<{ bytes: Buffer; type: string }> {
    const data = new FormData();
    data.append("purpose", "batch");
    data.append("file", new Blob([text]), "in.jsonl");
    const res = new Response(data);
    return {
      bytes: Buffer.from(await res.arrayBuffer()),
      type: res.headers.get("content-type") ?? "",
    };
  }

  it("an upload its client cut off frees its key: the retry runs (it had been kept as a 500 for 24 h)", async () => {
    const key = randomUUID();
    const { bytes, type } = await form(lines(2_000));
    const url = new URL(stack.url("/v1/files"));
    // half the body, then the connection closed, as a client timing out does
    await new Promise<void>((resolve) => {
      const req = request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: {
          "content-type": type,
          "content-length": bytes.length,
          authorization: "Bearer k1",
          "Idempotency-Key": key,
        },
      });
      req.on("error", () => resolve());
      req.write(bytes.subarray(0, bytes.length >> 1), () => {
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 300);
      });
    });
    let retry: Response | undefined;
    // the cut upload lets go of its claim once the API has seen the connection close
    for (let i = 0; i < 50; i++) {
      retry = await post("/v1/files", bytes, key, { type });
      if (retry.status !== 409) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(retry?.status).toBe(200);
    expect(((await retry?.json()) as { object?: string } | undefined)?.object).toBe("file");
  });

  it("a retry that takes over a claim whose upload stored its file finds it, and a retry with another payload is a 422, not that file", async () => {
    const key = randomUUID();
    const a = await form(lines(20));
    const first = await post("/v1/files", a.bytes, key, { type: a.type });
    expect(first.status).toBe(200);
    const fileId = await idOf(first);
    // as if its answer had not been stored (Redis failed there)
    await goneQuiet(key);
    // another payload under the key (it had been answered with the first's file, 200)
    const b = await form(lines(3));
    const other = await post("/v1/files", b.bytes, key, { type: b.type });
    expect(other.status).toBe(422);
    // the same payload again: the first's file, not a second one
    const again = await post("/v1/files", a.bytes, key, { type: a.type });
    expect(again.status).toBe(200);
    expect(await idOf(again)).toBe(fileId);
    expect((await post("/v1/files", b.bytes, key, { type: b.type })).status).toBe(422);
  });
});

describe("a takeover of an NDJSON batch's claim gone quiet", () => {
  it("finds the batch its first attempt sealed, and a retry with another payload is a 422, not that batch", async () => {
    const key = randomUUID();
    const ndjson = (n: number) =>
      Array.from({ length: n }, (_, i) => JSON.stringify({ key: `r${i}`, features })).join("\n");
    const send = (body: string) =>
      post("/v1/batches?model=digits", body, key, { type: "application/x-ndjson" });
    const first = await send(ndjson(30));
    expect(first.status).toBe(202);
    const batchId = await idOf(first);
    // as if its answer had not been stored
    await goneQuiet(key);
    // another payload (it had been answered with the first's batch, 202)
    expect((await send(ndjson(5))).status).toBe(422);
    const again = await send(ndjson(30));
    expect(again.status).toBe(202);
    expect(await idOf(again)).toBe(batchId);
    // and the answer kept now holds the body's fingerprint: the same body replays, another is 422
    const replayed = await send(ndjson(30));
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(await idOf(replayed)).toBe(batchId);
    expect((await send(ndjson(5))).status).toBe(422);
  });
});

describe("a claim still being worked on", () => {
  it("is not taken over as abandoned while its request runs, and is once it stops", async () => {
    const keys = new Keys(`${stack.prefix}-claims`);
    const store = new IdempotencyStore(redis, keys, 60, 300);
    const key = randomUUID();
    const first = await store.claim("t", key, "fp");
    expect(first.kind).toBe("claimed");
    const attempt = first.kind === "claimed" ? first.attempt : "";
    const unkeep = store.keepClaimed("t", key, attempt);
    try {
      // three stale times: without the renewal, a retry would have taken it over
      await new Promise((r) => setTimeout(r, 900));
      expect((await store.claim("t", key, "fp")).kind).toBe("in-progress");
    } finally {
      unkeep();
    }
    await new Promise((r) => setTimeout(r, 450));
    expect(await store.claim("t", key, "fp")).toMatchObject({ kind: "claimed", takeover: true });
    await redis.del(keys.idempotency("t", key));
  });

  it("once taken over, its attempt renews, answers, abandons and frees nothing of the key", async () => {
    const keys = new Keys(`${stack.prefix}-claims`);
    const store = new IdempotencyStore(redis, keys, 60, 100);
    const key = randomUUID();
    const first = await store.claim("t", key, "fp");
    await new Promise((r) => setTimeout(r, 150));
    const retry = await store.claim("t", key, "fp");
    if (first.kind !== "claimed" || retry.kind !== "claimed") throw new Error("not claimed");
    expect(retry.takeover).toBe(true);
    const answer = { status: 200, body: '{"id":"b"}', headers: {} };
    await store.answer("t", key, "fp", answer, retry);
    // the first attempt wakes (stalled, not dead) and ends as a failure would end it
    await store.abandon("t", key, "fp", first);
    await store.release("t", key, first.attempt);
    await store.answer("t", key, "fp", { ...answer, body: '{"id":"a"}' }, first);
    expect(await store.claim("t", key, "fp")).toMatchObject({ kind: "answered", answer });
    await redis.del(keys.idempotency("t", key));
  });
});

describe("Idempotency-Key on a background POST /v1/responses", () => {
  const response = (extra: Record<string, unknown> = {}) => ({
    model: "tiny-lm",
    input: "Once upon a time",
    max_output_tokens: 4,
    background: true,
    ...extra,
  });

  it("a retry gets the same stored response", async () => {
    const key = randomUUID();
    const first = await post("/v1/responses", response(), key);
    expect(first.status).toBe(200);
    const id = await idOf(first);
    const retry = await post("/v1/responses", response(), key);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await idOf(retry)).toBe(id);
  });

  it("a streamed one retried streams that same response again from its start", async () => {
    const key = randomUUID();
    const created = async (replayed: boolean) => {
      const res = await post("/v1/responses", response({ stream: true }), key);
      expect(res.status).toBe(200);
      expect(res.headers.get("idempotent-replayed")).toBe(replayed ? "true" : null);
      expect(res.headers.get("x-request-id")).toBeTruthy();
      let id = "";
      await readSse(res, (event) => {
        const data = JSON.parse(event.data) as { type: string; response?: { id: string } };
        if (data.type === "response.created") {
          id = data.response?.id ?? "";
          return "stop";
        }
        return undefined;
      });
      return id;
    };
    const first = await created(false);
    expect(first).toMatch(/^resp_/);
    expect(await created(true)).toBe(first);
  });
});

/** The idempotency record whose kept answer names `id`. */
async function findRecord(id: string): Promise<string> {
  for (const key of await keys("idempotency:*")) {
    const raw = await redis.get(key);
    if (raw?.includes(id)) return key;
  }
  throw new Error(`no idempotency record names ${id}`);
}
