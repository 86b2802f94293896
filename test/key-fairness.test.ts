import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack, waitFor } from "./helpers/stack.js";

// tiny-lm has no worker at first: what is queued for it stays queued. Its queue holds 20, one
// key 10 of it (KEY_QUEUE_SHARE 0.5); the worker started later has one seat, so it takes the
// queue's jobs one at a time, in the queue's order.
const repo = tempRepository({
  digits: {},
  "tiny-lm": {
    max_queue_size: 20,
    scheduler: { max_num_seqs: 1, max_num_batched_tokens: 2048 },
  },
});
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "k1,k2", ADMIN_TOKEN: "adm", KEY_QUEUE_SHARE: "0.5", KEY_MAX_PRIORITY: "7" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const submitAs = (key: string, k: number) =>
  stack.post(
    "/v1/jobs",
    { model: "tiny-lm", input: { prompt: `Q ${k}?`, max_tokens: 4 } },
    { Authorization: `Bearer ${key}` },
  );
const auth = { Authorization: "Bearer k1" };
const submit = (k: number) => submitAs("k1", k);
const k1Jobs: string[] = [];

describe("a request of several choices past its key's share", () => {
  it("takes none of its places before it answers 429: the retry it asks for fits", async () => {
    for (let k = 0; k < 8; k++) {
      const res = await submit(k);
      expect(res.status).toBe(202);
      k1Jobs.push(((await res.json()) as { id: string }).id);
    }
    // four choices, room for two: none is queued
    const several = await stack.post(
      "/v1/chat/completions",
      { model: "tiny-lm", messages: [{ role: "user", content: "hi" }], max_tokens: 4, n: 4 },
      auth,
    );
    expect(several.status).toBe(429);
    expect(await several.text()).toMatch(
      /This request's 4 choices need 4 places among those one key may have waiting for tiny-lm\.v1, and this key has 8 of its 10 taken/,
    );
    // the two places are free: a request that took them a choice at a time had held them 2 s
    // (until the share next looked them up), and three such at once were refused again and again
    const retried = [await submit(100), await submit(101)];
    expect(retried.map((r) => r.status)).toEqual([202, 202]);
    for (const res of retried) k1Jobs.push(((await res.json()) as { id: string }).id);
    expect((await submit(102)).status).toBe(429);
  }, 30_000);
});

// (after the test above: k1's ten jobs it queued wait for tiny-lm still)
describe("keys take turns within a priority", () => {
  it("another key's one job runs before the second of the ten one key queued first, at the same priority", async () => {
    const res = await submitAs("k2", 0);
    expect(res.status).toBe(202);
    const k2Job = ((await res.json()) as { id: string }).id;
    await stack.startWorker({ WORKER_MODELS: "tiny-lm" });
    const started = async (id: string, key: string) => {
      let view = { status: "queued", started_at: 0 };
      await waitFor(async () => {
        const res = await fetch(stack.url(`/v1/jobs/${id}`), {
          headers: { Authorization: `Bearer ${key}` },
        });
        view = (await res.json()) as typeof view;
        return view.status === "succeeded";
      }, 60_000);
      return view.started_at;
    };
    const k2At = await started(k2Job, "k2");
    const k1At = await Promise.all(k1Jobs.map((id) => started(id, "k1")));
    // first come first served, k2's would start after all ten of k1's; by turns, after the
    // first (which has k2's turn, and came first)
    expect(k1At.filter((at) => at < k2At)).toHaveLength(1);
  }, 90_000);
});

describe("KEY_MAX_PRIORITY", () => {
  it("a key asking above it is refused, on every way of asking; the admin may ask any", async () => {
    const features = new Array(64).fill(0);
    const asks: Array<[string, unknown, Record<string, string>]> = [
      ["/v1/models/digits/predict", { features, priority: 8 }, {}],
      ["/v1/models/digits/predict", { features }, { "X-Priority": "10" }],
      ["/v1/jobs", { model: "digits", input: { features }, priority: 9 }, {}],
      // a completion job's own input may carry its priority too
      ["/v1/jobs", { model: "tiny-lm", input: { prompt: "hi", max_tokens: 4, priority: 10 } }, {}],
      [
        "/v2/models/digits/infer",
        {
          inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }],
          parameters: { priority: 8 },
        },
        {},
      ],
    ];
    for (const [path, body, headers] of asks) {
      const refused = await stack.post(path, body, { Authorization: "Bearer k1", ...headers });
      expect(refused.status, path).toBe(400);
      expect(await refused.text()).toMatch(/priority \d+ is above the 7 an API key may ask/);
    }
    const within = await stack.post(
      "/v1/models/digits/predict",
      { features, priority: 7 },
      { Authorization: "Bearer k1" },
    );
    expect(within.status).toBe(200);
    const admin = await stack.post(
      "/v1/models/digits/predict",
      { features, priority: 10 },
      { Authorization: "Bearer adm" },
    );
    expect(admin.status).toBe(200);
  });
});
