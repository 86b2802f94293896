import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "digits,tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** `Server-Timing`'s metrics by name: their `dur` (ms), or their `desc`. */
function timings(res: Response): Record<string, number | string> {
  const header = res.headers.get("server-timing");
  expect(header, "a Server-Timing header").toBeTruthy();
  const out: Record<string, number | string> = {};
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().split(";");
    for (const p of params) {
      const [key, value] = p.split("=");
      if (key === "dur") out[name ?? ""] = Number(value);
      if (key === "desc") out[name ?? ""] = (value ?? "").replaceAll('"', "");
    }
  }
  return out;
}

/** queue, batch and infer measured, each within the total. */
function expectBreakdown(t: Record<string, number | string>) {
  for (const name of ["queue", "batch", "infer", "total"])
    expect(t[name], name).toBeTypeOf("number");
  const [queue, batch, infer, total] = ["queue", "batch", "infer", "total"].map(
    (n) => t[n] as number,
  );
  // the worker's parts are measured by its clock, the total by the API's: a few ms apart at most
  expect((queue ?? 0) + (batch ?? 0) + (infer ?? 0)).toBeLessThanOrEqual((total ?? 0) + 5);
  expect(infer).toBeGreaterThan(0);
}

describe("Server-Timing on every synchronous answer", () => {
  it("a predict, on the fast path and through Hono's route", async () => {
    const fast = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[2],
    });
    expect(fast.status).toBe(200);
    expectBreakdown(timings(fast));
    // a query string takes the request off the fast path
    const hono = await stack.post("/v1/models/digits/predict?via=hono", {
      features: samples.digits.inputs[3],
    });
    expect(hono.status).toBe(200);
    expectBreakdown(timings(hono));
  });

  it("a cached predict says so", async () => {
    const body = { features: samples.digits.inputs[4] };
    await stack.post("/v1/models/digits/predict", body);
    const again = await stack.post("/v1/models/digits/predict", body);
    expect(((await again.json()) as { source: string }).source).toBe("cache");
    const t = timings(again);
    expect(t.cache).toBe("hit");
    expect(t.infer).toBeUndefined();
    expect(t.total).toBeTypeOf("number");
  });

  it("a v2 infer", async () => {
    const res = await stack.post("/v2/models/digits/infer", {
      inputs: [
        {
          name: "input",
          shape: [2, 64],
          datatype: "FP32",
          data: [...(samples.digits.inputs[5] ?? []), ...(samples.digits.inputs[6] ?? [])],
        },
      ],
    });
    expect(res.status).toBe(200);
    expectBreakdown(timings(res));
  });

  it("a completion and a response that are not streamed: queue, waiting for a seat, inference", async () => {
    for (const [path, body] of [
      ["/v1/completions", { prompt: "Once upon a time", max_tokens: 8 }],
      ["/v1/responses", { input: "Once upon a time", max_output_tokens: 8 }],
    ] as const) {
      const res = await stack.post(path, { model: "tiny-lm", ...body });
      expect(res.status, path).toBe(200);
      expectBreakdown(timings(res));
    }
  });

  it("every synchronous generation names its jobs in X-Job-Id, whose events stay readable", async () => {
    const named = async (path: string, body: unknown, jobs = 1) => {
      const res = await stack.post(path, body);
      expect(res.status, path).toBe(200);
      const ids = (res.headers.get("x-job-id") ?? "").split(", ").filter(Boolean);
      expect(ids, path).toHaveLength(jobs);
      for (const id of ids) {
        const events = await fetch(stack.url(`/v1/jobs/${id}/events`));
        expect(events.status, path).toBe(200);
        expect(await events.text(), path).toContain("event: done");
      }
      return { ids, answer: (await res.json()) as { id?: string } };
    };
    const completion = await named(
      "/v1/completions",
      {
        model: "tiny-lm",
        prompt: ["Once", "Twice"],
        max_tokens: 4,
      },
      2,
    );
    expect(completion.answer.id).toBe(`cmpl-${completion.ids[0]}`);
    await named("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 4,
    });
    // Triton's generate answer carries no id of Ferry's: the header is the only way to its job
    await named("/v2/models/tiny-lm/generate", {
      text_input: "Hello",
      parameters: { max_tokens: 4 },
    });
    await named("/v1/responses", { model: "tiny-lm", input: "Hi", max_output_tokens: 4 });
    // a refusal ran nothing
    const refused = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Hi",
      max_tokens: 99_999,
    });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("x-job-id")).toBeNull();
  });

  it("an async job's result carries the same timings", async () => {
    for (const input of [
      { features: samples.digits.inputs[7] },
      { prompt: "Hello", max_tokens: 4 },
    ]) {
      const model = "features" in input ? "digits" : "tiny-lm";
      const res = await stack.post("/v1/jobs", { model, input });
      const { id } = (await res.json()) as { id: string };
      let job: { status: string; timings: Record<string, number> | null } = {
        status: "",
        timings: null,
      };
      await waitFor(async () => {
        job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as typeof job;
        return job.status === "succeeded";
      }, 30_000);
      const t = job.timings;
      expect(t, model).not.toBeNull();
      expect((t?.queue_ms ?? 0) + (t?.batch_ms ?? 0) + (t?.infer_ms ?? 0)).toBeLessThanOrEqual(
        (t?.total_ms ?? 0) + 5,
      );
      expect(t?.infer_ms).toBeGreaterThan(0);
    }
  });
});

describe("GenAI and classifier metrics", () => {
  const scrape = async (url: string) => (await fetch(url)).text();

  it("the API counts token usage by type and times each classifier row's queue, batch and compute", async () => {
    await stack.post("/v1/completions", { model: "tiny-lm", prompt: "Hi", max_tokens: 3 });
    await stack.post("/v1/models/digits/predict", { features: samples.digits.inputs[8] });
    const text = await scrape(stack.url("/metrics"));
    expect(text).toMatch(
      /gen_ai_client_token_usage_count\{gen_ai_operation_name="text_completion",gen_ai_request_model="tiny-lm",gen_ai_token_type="output"\} [1-9]/,
    );
    expect(text).toMatch(/gen_ai_client_token_usage_count\{[^}]*gen_ai_token_type="input"\} [1-9]/);
    for (const name of [
      "ferry_queue_wait_seconds",
      "ferry_batch_wait_seconds",
      "ferry_compute_time_seconds",
    ])
      expect(text).toMatch(new RegExp(`${name}_count\\{model="digits",version="\\d+"\\} [1-9]`));
  });

  it("the worker exports the GenAI server metrics", async () => {
    await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 4,
    });
    const text = await scrape(stack.workers[0]?.metricsUrl ?? "");
    for (const name of [
      "gen_ai_server_time_to_first_token_seconds",
      "gen_ai_server_time_per_output_token_seconds",
      "gen_ai_server_request_duration_seconds",
    ])
      expect(text).toMatch(
        new RegExp(
          `${name}_count\\{[^}]*gen_ai_operation_name="chat",gen_ai_request_model="tiny-lm"[^}]*\\} [1-9]`,
        ),
      );
  });

  it("a completion whose first token is the end of text still has its time to first token", async () => {
    const ttftCount = async () => {
      const text = await scrape(stack.workers[0]?.metricsUrl ?? "");
      const m = text.match(
        /gen_ai_server_time_to_first_token_seconds_count\{[^}]*gen_ai_operation_name="text_completion",gen_ai_request_model="tiny-lm"[^}]*\} (\d+)/,
      );
      return Number(m?.[1] ?? 0);
    };
    const before = await ttftCount();
    // tiny-lm's end of text is token 256: the only one it may draw, it is drawn first
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Hi",
      max_tokens: 4,
      allowed_token_ids: [256],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      choices: Array<{ text: string; finish_reason: string }>;
      usage: { completion_tokens: number };
    };
    expect(body.choices[0]).toMatchObject({ text: "", finish_reason: "stop" });
    // no token was sent, and it had none counted where the first token is timed (nor in the
    // dashboard's slowest requests)
    expect(await ttftCount()).toBe(before + 1);
  });
});
