import { cpSync } from "node:fs";
import { join } from "node:path";
import { createParser } from "eventsource-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack, waitFor } from "./helpers/stack.js";
import { statsAcross, statsAt } from "./helpers/triton-stats.js";

// tiny-lm with a second version (the same graph, a queue and statistics of its own), the
// stable one still 1: what runs on version 2 shows in version 2's statistics, and only there
const repo = tempRepository({ "tiny-lm": { versions: { "1": {}, "2": {} } } });
cpSync(join(repo, "tiny-lm", "1"), join(repo, "tiny-lm", "2"), { recursive: true });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" },
  apiEnv: { ADMIN_TOKEN: "t" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const body = { text_input: "Once upon a time", parameters: { max_tokens: 4, temperature: 0 } };

describe("a text model's version named by the route", () => {
  it("Triton's /versions/{v}/generate runs on that version; the unversioned route on the stable one", async () => {
    let named: Response | undefined;
    const { after, before } = await statsAcross(stack, "tiny-lm", "2", 1, async () => {
      named = await stack.post("/v2/models/tiny-lm/versions/2/generate", body);
    });
    expect(named?.status).toBe(200);
    expect(await named?.json()).toMatchObject({ model_name: "tiny-lm", model_version: "2" });
    expect(after.inference_count - before.inference_count).toBe(1);
    const stable = await stack.post("/v2/models/tiny-lm/generate", body);
    expect(await stable.json()).toMatchObject({ model_version: "1" });
    // as Triton's curl examples send it: no Content-Type, read as the JSON it is
    const curled = await fetch(stack.url("/v2/models/tiny-lm/versions/2/generate"), {
      method: "POST",
      body: new TextEncoder().encode(JSON.stringify(body)),
    });
    expect(curled.status).toBe(200);
    expect(await curled.json()).toMatchObject({ model_version: "2" });
  });

  it("Triton's /versions/{v}/generate_stream too: every piece names it", async () => {
    let res: Response | undefined;
    const { after, before } = await statsAcross(stack, "tiny-lm", "2", 1, async () => {
      res = await stack.post("/v2/models/tiny-lm/versions/2/generate_stream", body);
    });
    expect(res?.status).toBe(200);
    const pieces: Array<Record<string, unknown>> = [];
    createParser({ onEvent: (e) => pieces.push(JSON.parse(e.data)) }).feed(
      (await res?.text()) ?? "",
    );
    expect(pieces.length).toBeGreaterThan(0);
    for (const piece of pieces) expect(piece).toMatchObject({ model_version: "2" });
    expect(after.inference_count - before.inference_count).toBe(1);
  });

  it("an async completion job runs on the job's version (it ran on the stable one, silently)", async () => {
    let id = "";
    const { after, before } = await statsAcross(stack, "tiny-lm", "2", 1, async () => {
      const res = await stack.post("/v1/jobs", {
        model: "tiny-lm",
        version: "2",
        input: { prompt: "Once upon a time", max_tokens: 4 },
      });
      expect(res.status).toBe(202);
      id = ((await res.json()) as { id: string }).id;
      await waitFor(
        async () =>
          ((await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as { status: string })
            .status === "succeeded",
        30_000,
      );
    });
    expect(after.inference_count - before.inference_count).toBe(1);
  });

  it("a version the model lacks is a 404 naming it, before anything is queued", async () => {
    const generate = await stack.post("/v2/models/tiny-lm/versions/3/generate", body);
    expect(generate.status).toBe(404);
    expect(((await generate.json()) as { error: string }).error).toMatch(/no version '3'/);
    const stream = await stack.post("/v2/models/tiny-lm/versions/3/generate_stream", body);
    expect(stream.status).toBe(404);
    const job = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      version: "3",
      input: { prompt: "Once upon a time", max_tokens: 4 },
    });
    expect(job.status).toBe(404);
  });

  it("a canary split routes a text model's requests, as a classifier's; a rollback takes them all back (both were accepted and ignored)", async () => {
    const admin = (path: string, method: string, split?: Record<string, number>) =>
      fetch(stack.url(path), {
        method,
        headers: { Authorization: "Bearer t", "Content-Type": "application/json" },
        ...(split ? { body: JSON.stringify(split) } : {}),
      });
    expect((await admin("/admin/models/tiny-lm/traffic", "PUT", { "1": 0, "2": 100 })).status).toBe(
      200,
    );
    const completion = { model: "tiny-lm", prompt: "Once upon a time", max_tokens: 4 };
    let generated: Response | undefined;
    const { after, before } = await statsAcross(stack, "tiny-lm", "2", 2, async () => {
      expect((await stack.post("/v1/completions", completion)).status).toBe(200);
      generated = await stack.post("/v2/models/tiny-lm/generate", body);
    });
    expect(after.inference_count - before.inference_count).toBe(2);
    expect(await generated?.json()).toMatchObject({ model_version: "2" });
    expect((await admin("/admin/models/tiny-lm/rollback", "POST")).status).toBe(200);
    const back = await stack.post("/v2/models/tiny-lm/generate", body);
    expect(await back.json()).toMatchObject({ model_version: "1" });
  });

  it("a split routes a request, not each of its choices: a request's choices all run on the version it drew", async () => {
    const admin = (path: string, split: Record<string, number>) =>
      fetch(stack.url(path), {
        method: "PUT",
        headers: { Authorization: "Bearer t", "Content-Type": "application/json" },
        body: JSON.stringify(split),
      });
    expect((await admin("/admin/models/tiny-lm/traffic", { "1": 50, "2": 50 })).status).toBe(200);
    const counts = async () =>
      Promise.all(
        ["1", "2"].map(async (v) => {
          const [stats] = await statsAt(stack, `/v2/models/tiny-lm/versions/${v}/stats`);
          return stats?.inference_count ?? 0;
        }),
      );
    // each process adds its counts once a second: what earlier work adds is waited out first
    await new Promise((r) => setTimeout(r, 1_500));
    for (let round = 0; round < 3; round++) {
      const before = await counts();
      const res = await stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt: `Once ${round}`,
        max_tokens: 2,
        n: 12,
      });
      expect(res.status).toBe(200);
      let gained = [0, 0];
      await waitFor(async () => {
        const now = await counts();
        gained = now.map((n, k) => n - (before[k] ?? 0));
        return (gained[0] ?? 0) + (gained[1] ?? 0) >= 12;
      }, 10_000);
      // drawn a choice at a time, 12 choices at 50/50 split about 6 and 6
      expect(gained.sort((a, b) => a - b)).toEqual([0, 12]);
    }
    const rollback = await fetch(stack.url("/admin/models/tiny-lm/rollback"), {
      method: "POST",
      headers: { Authorization: "Bearer t" },
    });
    expect(rollback.status).toBe(200);
  });
});
