import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

const stack = new Stack();
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const digitRows = samples.digits.inputs.slice(0, 16);

describe("classifier path, end to end", () => {
  it("answers /predict with the same class and probability as in-process ONNX Runtime", async () => {
    const reference = await referenceLogits("digits", "2", digitRows);
    for (const [k, features] of digitRows.entries()) {
      const res = await stack.post("/v1/models/digits/predict", { features });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Record<string, unknown>;
      const logits = reference[k] ?? [];
      const probs = softmax(logits);
      expect(body.prediction).toBe(argmax(logits));
      expect(body.confidence as number).toBeCloseTo(Math.max(...probs), 5);
      expect(body.model_version).toBe("2");
      expect(body.source).toBe("model");
      expect(typeof body.latency_ms).toBe("number");
    }
  });

  it("the compute-bound digits-cnn answers as in-process ONNX Runtime, and knows its held-out rows", async () => {
    const rows = samples.mnist.inputs;
    const reference = (await referenceLogits("digits-cnn", "1", rows)).map(argmax);
    const answers = await Promise.all(
      rows.map(async (features) => {
        const res = await stack.post("/v1/models/digits-cnn/predict", { features });
        return ((await res.json()) as { prediction: number }).prediction;
      }),
    );
    expect(answers).toEqual(reference);
    const right = answers.filter((p, k) => p === samples.mnist.labels[k]).length;
    expect(right / rows.length).toBeGreaterThanOrEqual(0.9);
  });

  it("serves v2 infer on a pinned version with logits equal to in-process ONNX Runtime", async () => {
    for (const version of ["1", "2"]) {
      const reference = await referenceLogits("digits", version, digitRows.slice(0, 4));
      const res = await stack.post(`/v2/models/digits/versions/${version}/infer`, {
        id: `req-${version}`,
        inputs: [
          { name: "input", shape: [4, 64], datatype: "FP32", data: digitRows.slice(0, 4).flat() },
        ],
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        model_name: string;
        model_version: string;
        id: string;
        outputs: Array<{ name: string; shape: number[]; data: number[] }>;
      };
      expect(body).toMatchObject({
        model_name: "digits",
        model_version: version,
        id: `req-${version}`,
      });
      expect(body.outputs[0]?.shape).toEqual([4, 10]);
      const got = body.outputs[0]?.data ?? [];
      for (const [k, x] of reference.flat().entries()) expect(got[k]).toBeCloseTo(x, 4);
    }
  });

  it("accepts nested v2 data and honours the outputs filter", async () => {
    const res = await stack.post("/v2/models/mnist/infer", {
      inputs: [
        {
          name: "input",
          shape: [2, 784],
          datatype: "FP32",
          data: samples.mnist.inputs.slice(0, 2),
        },
      ],
      outputs: [{ name: "logits" }],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      id: string;
      outputs: Array<{ name: string; data: number[] }>;
    };
    expect(body.outputs.map((o) => o.name)).toEqual(["logits"]);
    const data = body.outputs[0]?.data ?? [];
    expect([argmax(data.slice(0, 10)), argmax(data.slice(10, 20))]).toEqual(
      samples.mnist.labels.slice(0, 2),
    );
    expect(body.id).toBe(res.headers.get("x-request-id"));
  });

  it("echoes the caller's X-Request-Id", async () => {
    const res = await stack.post(
      "/v1/models/digits/predict",
      { features: digitRows[0] },
      { "X-Request-Id": "trace-abc-123" },
    );
    expect(res.headers.get("x-request-id")).toBe("trace-abc-123");
  });

  it("answers 200 concurrent predicts correctly, in batches larger than one", async () => {
    const rows = Array.from({ length: 200 }, (_, k) => k % samples.digits.inputs.length);
    const reference = await referenceLogits("digits", "2", samples.digits.inputs);
    const answers = await Promise.all(
      rows.map(async (k) => {
        // no-cache: every one of them must reach a worker
        const res = await stack.post(
          "/v1/models/digits/predict",
          { features: samples.digits.inputs[k] },
          { "Cache-Control": "no-cache" },
        );
        return { k, status: res.status, body: (await res.json()) as { prediction: number } };
      }),
    );
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body.prediction).toBe(argmax(reference[a.k] ?? []));
    }
    const metrics = await (await fetch(stack.url("/metrics"))).text();
    const sum = metricValue(metrics, 'ferry_batch_size_sum{model="digits",version="2"}');
    const count = metricValue(metrics, 'ferry_batch_size_count{model="digits",version="2"}');
    expect(count).toBeGreaterThanOrEqual(200);
    expect(sum / count).toBeGreaterThan(1);
    expect(metrics).toContain("ferry_queue_time_seconds_bucket");
    expect(metrics).toContain("ferry_compute_time_seconds_bucket");
    // every request that waited for an event-loop turn has had it
    expect(metricValue(metrics, "ferry_api_turn_waiting_requests")).toBe(0);
    expect(metrics).toMatch(
      /ferry_http_requests_total\{route="\/v1\/models\/:name\/predict",method="POST",status="200"\} \d+/,
    );
  });

  it("reports health, readiness and model metadata", async () => {
    const health = (await (await fetch(stack.url("/health"))).json()) as {
      redis: string;
      models: Record<string, { ready: boolean; workers: number }>;
    };
    expect(health.redis).toBe("up");
    expect(health.models.digits).toEqual({ ready: true, workers: 1 });
    expect((await fetch(stack.url("/v2/health/live"))).status).toBe(200);
    expect((await fetch(stack.url("/v2/health/ready"))).status).toBe(200);
    expect((await fetch(stack.url("/v2/models/digits/ready"))).status).toBe(200);
    const meta = await (await fetch(stack.url("/v2/models/digits"))).json();
    expect(meta).toMatchObject({
      name: "digits",
      versions: ["1", "2"],
      inputs: [{ name: "input", datatype: "FP32", shape: [-1, 64] }],
      outputs: [{ name: "logits", datatype: "FP32", shape: [-1, 10] }],
    });
  });

  it("publishes an OpenAPI document with every route", async () => {
    const doc = (await (await fetch(stack.url("/openapi.json"))).json()) as {
      paths: Record<string, unknown>;
    };
    for (const path of [
      "/health",
      "/v2/health/live",
      "/v2/health/ready",
      "/metrics",
      "/v1/models/{name}/predict",
      "/v2/models/{name}",
      "/v2/models/{name}/ready",
      "/v2/models/{name}/infer",
      "/v2/models/{name}/versions/{version}/infer",
      "/v2/models/{name}/versions/{version}",
      "/v2/models/{name}/config",
      "/v2/models/{name}/stats",
      "/v2/models/stats",
      "/v2/models/{name}/generate",
      "/v2/models/{name}/generate_stream",
      "/v2/models/{name}/versions/{version}/generate",
      "/v2/models/{name}/versions/{version}/generate_stream",
      "/v2/repository/index",
      "/v2/repository/models/{name}/load",
      "/v2/repository/models/{name}/unload",
      "/admin/models/{name}/reload",
      "/v1/jobs",
      "/v1/jobs/{id}",
      "/v1/completions",
      "/v1/chat/completions",
      "/v1/responses",
      "/v1/responses/{id}",
      "/v1/responses/{id}/cancel",
      "/v1/responses/{id}/input_items",
      "/tokenize",
      "/detokenize",
    ]) {
      expect(Object.keys(doc.paths)).toContain(path);
    }
  });
});

function softmax(xs: number[]): number[] {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

function metricValue(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return Number(line?.split(" ")[1] ?? Number.NaN);
}
