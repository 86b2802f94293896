import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

// tiny-lm has no worker here: what is queued for it stays queued. Its queue holds 20, one key
// 10 of it (KEY_QUEUE_SHARE 0.5).
const repo = tempRepository({ digits: {}, "tiny-lm": { max_queue_size: 20 } });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "k1,k2", KEY_QUEUE_SHARE: "0.5" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const auth = { Authorization: "Bearer k1" };
const submit = (k: number) =>
  stack.post("/v1/jobs", { model: "tiny-lm", input: { prompt: `Q ${k}?`, max_tokens: 4 } }, auth);

describe("a request of several choices refused midway by its key's share", () => {
  it("gives back the places its first choices took before it answers 429: the retry it asks for fits", async () => {
    for (let k = 0; k < 8; k++) expect((await submit(k)).status).toBe(202);
    // four choices, room for two: two are queued, the third refused
    const several = await stack.post(
      "/v1/chat/completions",
      { model: "tiny-lm", messages: [{ role: "user", content: "hi" }], max_tokens: 4, n: 4 },
      auth,
    );
    expect(several.status).toBe(429);
    expect(await several.text()).toMatch(/This key has 10 requests waiting for tiny-lm.v1/);
    // the two places it had taken are free at once, not when the share next looks them up
    // (before: held 2 s, so that three such requests at once were refused again and again)
    expect([(await submit(100)).status, (await submit(101)).status]).toEqual([202, 202]);
    expect((await submit(102)).status).toBe(429);
  }, 30_000);
});
