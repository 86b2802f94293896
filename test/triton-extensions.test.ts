import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { referenceLogits, samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";
import { statsAcross, statsAt } from "./helpers/triton-stats.js";

const stack = new Stack({ env: { WORKER_MODELS: "digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const rows = samples.digits.inputs.slice(0, 3);
const version = "2";
const path = `/v2/models/digits/versions/${version}/infer`;

/** A request as tritonclient's HTTP client sends it by default: the JSON, then each input's bytes. */
function binaryRequest(json: unknown, ...tensors: Uint8Array[]): RequestInit {
  const header = Buffer.from(JSON.stringify(json));
  return {
    method: "POST",
    headers: {
      "Content-Type": "application/octet-stream",
      "Inference-Header-Content-Length": String(header.length),
    },
    body: Buffer.concat([header, ...tensors]),
  };
}

const fp32 = (values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
const input = (parameters?: Record<string, unknown>) => ({
  name: "input",
  shape: [rows.length, 64],
  datatype: "FP32",
  ...(parameters ? { parameters } : { data: rows.flat() }),
});

/** A binary answer split as tritonclient splits it: the JSON, then the bytes after it. */
async function readBinary(res: Response) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/octet-stream");
  const length = Number(res.headers.get("inference-header-content-length"));
  const body = Buffer.from(await res.arrayBuffer());
  return {
    json: JSON.parse(body.subarray(0, length).toString()) as {
      outputs: Array<{
        name: string;
        shape: number[];
        datatype: string;
        data?: unknown[];
        parameters?: { binary_data_size: number };
      }>;
    },
    bytes: body.subarray(length),
  };
}

async function refused(init: RequestInit, message: RegExp) {
  const res = await fetch(stack.url(path), init);
  expect(res.status).toBe(400);
  expect(((await res.json()) as { error: string }).error).toMatch(message);
}

describe("Triton's binary tensor data extension", () => {
  it("binary inputs answer as the same request in JSON does, and as ONNX Runtime in this process", async () => {
    const expected = (await referenceLogits("digits", version, rows)).flat();
    const jsonAnswer = await stack.post(path, { inputs: [input()] });
    const asJson = (await jsonAnswer.json()) as { outputs: Array<{ data: number[] }> };
    const res = await fetch(
      stack.url(path),
      binaryRequest(
        { inputs: [input({ binary_data_size: rows.length * 64 * 4 })] },
        fp32(rows.flat()),
      ),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("inference-header-content-length")).toBeNull(); // no binary output asked
    const body = (await res.json()) as {
      outputs: Array<{ name: string; shape: number[]; data: number[] }>;
    };
    expect(body.outputs[0]?.shape).toEqual([3, 10]);
    expect(body.outputs[0]?.data).toEqual(asJson.outputs[0]?.data);
    for (const [k, v] of (body.outputs[0]?.data ?? []).entries())
      expect(v).toBeCloseTo(expected[k] ?? Number.NaN, 5);
  });

  it("outputs asked for as binary come after the JSON, little-endian, their sizes in it", async () => {
    const expected = (await referenceLogits("digits", version, rows)).flat();
    for (const json of [
      { inputs: [input()], parameters: { binary_data_output: true } },
      { inputs: [input()], outputs: [{ name: "logits", parameters: { binary_data: true } }] },
    ]) {
      const { json: header, bytes } = await readBinary(await stack.post(path, json));
      expect(header.outputs).toEqual([
        { name: "logits", datatype: "FP32", shape: [3, 10], parameters: { binary_data_size: 120 } },
      ]);
      const logits = new Float32Array(new Uint8Array(bytes).buffer);
      expect(logits.length).toBe(30);
      for (const [k, v] of logits.entries()) expect(v).toBeCloseTo(expected[k] ?? Number.NaN, 5);
    }
    // an output's own binary_data: false overrides the request's binary_data_output
    const res = await stack.post(path, {
      inputs: [input()],
      outputs: [{ name: "logits", parameters: { binary_data: false } }],
      parameters: { binary_data_output: true },
    });
    expect(res.headers.get("content-type")).toMatch(/json/);
    expect(
      ((await res.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data,
    ).toHaveLength(30);
  });

  it("refuses a binary body that does not add up, in KServe's error shape", async () => {
    const data = fp32(rows.flat());
    const declared = (size: number) => ({ inputs: [input({ binary_data_size: size })] });
    await refused(
      binaryRequest(declared(100), data),
      /binary_data_size is 100, shape \[3,64\] of FP32 needs 768 bytes/,
    );
    await refused(
      binaryRequest(declared(768), data, new Uint8Array(4)),
      /4 bytes after the binary tensor data/,
    );
    await refused(
      binaryRequest(declared(768), data.subarray(0, 700)),
      /runs past the end of the body/,
    );
    await refused(
      binaryRequest({ inputs: [{ ...input({ binary_data_size: 768 }), datatype: "BYTES" }] }, data),
      // BYTES is texts (an embedder's): each element a 4-byte length and its bytes
      /does not hold exactly 192 length-prefixed BYTES elements/,
    );
    await refused(
      {
        ...binaryRequest(declared(768), data),
        headers: { "Inference-Header-Content-Length": "99999" },
      },
      /Inference-Header-Content-Length 99999 does not fit a body of/,
    );
    // the size as text: it had been refused with a message that named no fault ("is 768,
    // needs 768 bytes")
    await refused(
      binaryRequest({ inputs: [input({ binary_data_size: "768" })] }, data),
      /binary_data_size must be a whole number of bytes/,
    );
    // BYTES elements are UTF-8 text: a byte that is not one is refused, not made U+FFFD
    const element = new Uint8Array([2, 0, 0, 0, 0xc3, 0x28]);
    await refused(
      binaryRequest(
        {
          inputs: [
            { ...input({ binary_data_size: element.length }), datatype: "BYTES", shape: [1] },
          ],
        },
        element,
      ),
      /element 0 is not UTF-8 text/,
    );
  });
});

describe("Triton's classification extension", () => {
  it("the top classes as value:index:label strings, each row's first the class /v1 predicts", async () => {
    const logits = await referenceLogits("digits", version, rows);
    const res = await stack.post(path, {
      inputs: [input()],
      outputs: [{ name: "logits", parameters: { classification: 3 } }],
    });
    expect(res.status).toBe(200);
    const out = (
      (await res.json()) as {
        outputs: Array<{ datatype: string; shape: number[]; data: string[] }>;
      }
    ).outputs[0];
    expect(out?.datatype).toBe("BYTES");
    expect(out?.shape).toEqual([3, 3]);
    for (const [r, row] of logits.entries()) {
      const top = row
        .map((v, k) => [v, k] as const)
        .sort((a, b) => b[0] - a[0])
        .slice(0, 3);
      const got = out?.data.slice(r * 3, r * 3 + 3).map((s) => s.split(":"));
      expect(got?.map((g) => Number(g[1]))).toEqual(top.map(([, k]) => k));
      // digits' labels are its class names, "0" to "9"
      expect(got?.map((g) => g[2])).toEqual(top.map(([, k]) => String(k)));
      for (const [k, g] of (got ?? []).entries())
        expect(Number(g[0])).toBeCloseTo(top[k]?.[0] ?? Number.NaN, 5);
      const predicted = await stack.post(`/v1/models/digits/predict`, { features: rows[r] });
      expect(((await predicted.json()) as { prediction: number }).prediction).toBe(
        Number(got?.[0]?.[1]),
      );
    }
  });

  it("as binary: each string a 4-byte length and its bytes; an async job renders it too", async () => {
    const { json, bytes } = await readBinary(
      await stack.post(path, {
        inputs: [input()],
        outputs: [{ name: "logits", parameters: { classification: 1, binary_data: true } }],
      }),
    );
    const size = json.outputs[0]?.parameters?.binary_data_size ?? 0;
    expect(bytes.length).toBe(size);
    const strings: string[] = [];
    for (let at = 0; at < bytes.length; ) {
      const length = bytes.readUInt32LE(at);
      strings.push(bytes.subarray(at + 4, at + 4 + length).toString());
      at += 4 + length;
    }
    expect(strings).toHaveLength(3);
    const sync = await stack.post(path, {
      inputs: [input()],
      outputs: [{ name: "logits", parameters: { classification: 1 } }],
    });
    expect(
      ((await sync.json()) as { outputs: Array<{ data: string[] }> }).outputs[0]?.data,
    ).toEqual(strings);
    const job = await stack.post("/v1/jobs", {
      model: "digits",
      version,
      input: {
        inputs: [input()],
        outputs: [{ name: "logits", parameters: { classification: 1 } }],
      },
    });
    const { id } = (await job.json()) as { id: string };
    let polled:
      | { status: string; result: { outputs: Array<{ data: string[] }> } | null }
      | undefined;
    for (let k = 0; k < 100 && polled?.status !== "succeeded"; k++) {
      await new Promise((r) => setTimeout(r, 50));
      polled = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as typeof polled;
    }
    expect(polled?.result?.outputs[0]?.data).toEqual(strings);
  });

  it("refuses a count past the classes, and output parameters it lacks", async () => {
    const ask = (parameters: Record<string, unknown>) =>
      ({
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ inputs: [input()], outputs: [{ name: "logits", parameters }] }),
      }) satisfies RequestInit;
    await refused(
      ask({ classification: 11 }),
      /classification must be a whole number from 1 to 10/,
    );
    await refused(ask({ classification: 0 }), /classification must be a whole number from 1 to 10/);
    await refused(
      ask({ shared_memory_region: "r" }),
      /parameter 'shared_memory_region' is not supported/,
    );
  });

  it("an empty outputs list is every output, as Triton reads it", async () => {
    const res = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ inputs: [input()], outputs: [] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: Array<{ name: string; data: number[] }> };
    expect(body.outputs.map((o) => o.name)).toEqual(["logits"]);
    expect(body.outputs[0]?.data).toHaveLength(rows.length * 10);
  });
});

describe("KServe v2 version metadata", () => {
  it("GET /v2/models/{name}/versions/{version}: that version's inputs and outputs; an unknown one is a 404", async () => {
    const res = await fetch(stack.url("/v2/models/digits/versions/1"));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      name: "digits",
      versions: ["1"],
      inputs: [{ name: "input", datatype: "FP32", shape: [-1, 64] }],
      outputs: [{ name: "logits", datatype: "FP32", shape: [-1, 10] }],
    });
    const missing = await fetch(stack.url("/v2/models/digits/versions/9"));
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "Model 'digits' has no version '9'" });
  });

  it("GET /v2/models/{name}/config: model.json as Triton's config in JSON", async () => {
    const model = JSON.parse(readFileSync("models/digits/model.json", "utf8")) as {
      max_batch_size: number;
      instance_count: number;
      dynamic_batching: { preferred_batch_sizes: number[]; max_queue_delay_ms: number };
    };
    const res = await fetch(stack.url("/v2/models/digits/config"));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      name: "digits",
      platform: "onnxruntime_onnx",
      backend: "onnxruntime",
      version_policy: { specific: { versions: [1, 2] } },
      max_batch_size: model.max_batch_size,
      input: [{ name: "input", data_type: "TYPE_FP32", dims: [64] }],
      output: [{ name: "logits", data_type: "TYPE_FP32", dims: [10] }],
      dynamic_batching: {
        preferred_batch_size: model.dynamic_batching.preferred_batch_sizes,
        max_queue_delay_microseconds: model.dynamic_batching.max_queue_delay_ms * 1000,
        default_queue_policy: expect.objectContaining({ max_queue_size: expect.any(Number) }),
      },
      instance_group: [{ name: "digits", kind: "KIND_CPU", count: model.instance_count }],
      default_model_filename: "model.onnx",
    });
    expect((await fetch(stack.url("/v2/models/nope/config"))).status).toBe(404);
  });

  it("POST /v2/repository/index: every version of every model, READY where a worker serves it", async () => {
    const res = await fetch(stack.url("/v2/repository/index"), { method: "POST" });
    expect(res.status).toBe(200);
    const index = (await res.json()) as Array<{
      name: string;
      version: string;
      state: string;
      reason: string;
    }>;
    // this stack's worker serves digits alone
    expect(index.filter((m) => m.name === "digits")).toEqual([
      { name: "digits", version: "1", state: "READY", reason: "" },
      { name: "digits", version: "2", state: "READY", reason: "" },
    ]);
    expect(index.find((m) => m.name === "tiny-lm")).toEqual({
      name: "tiny-lm",
      version: "1",
      state: "UNAVAILABLE",
      reason: "no live worker serves this version",
    });
  });
});

describe("Triton's request parameters", () => {
  it("timeout in microseconds is the request's deadline; a sequence is refused, no model here keeping one", async () => {
    const body = (parameters: Record<string, unknown>) => ({
      inputs: [{ name: "input", shape: [1, 784], datatype: "FP32", data: new Array(784).fill(0) }],
      parameters,
    });
    // mnist has no worker in this stack: the request waits out its deadline, 0.3 s, not the model's 30 s
    const started = Date.now();
    const late = await stack.post("/v2/models/mnist/infer", body({ timeout: 300_000 }));
    expect(late.status).toBe(504);
    expect(Date.now() - started).toBeLessThan(5_000);
    const refused = await stack.post("/v2/models/digits/infer", {
      ...body({ sequence_id: 42, sequence_start: true }),
      inputs: [input()],
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /^parameters\.sequence_id: sequence_id is not supported/,
    );
    const none = await stack.post("/v2/models/digits/infer", {
      inputs: [input()],
      parameters: { sequence_id: 0, timeout: 0 },
    });
    expect(none.status).toBe(200);
  });
});

describe("Triton's statistics extension", () => {
  it("counts what clients sent: requests and their time, rows, queue and compute, executions by batch size, cache hits", async () => {
    let started = 0;
    const { before, after, added, time, rows, runs } = await statsAcross(
      stack,
      "digits",
      version,
      5,
      async () => {
        started = Date.now();
        // three rows in one request; two inputs no request sent before; the first of them again
        const v2 = await fetch(stack.url(path), {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ inputs: [input()] }),
        });
        expect(v2.status).toBe(200);
        const fresh = [20, 21].map((k) => (samples.digits.inputs[k] ?? []).map((v) => v + 0.0123));
        for (const features of fresh)
          expect((await stack.post("/v1/models/digits/predict", { features })).status).toBe(200);
        const again = await stack.post("/v1/models/digits/predict", { features: fresh[0] });
        expect(((await again.json()) as { source?: string }).source).toBe("cache");
      },
    );
    expect(after.inference_count - before.inference_count).toBe(5);
    // the v2 request, the two new inputs and the cached answer
    expect(added("success")).toBe(4);
    expect(added("fail")).toBe(0);
    expect(added("cache_hit")).toBe(1);
    expect(added("cache_miss")).toBe(2);
    expect(added("queue")).toBe(5);
    expect(added("compute_infer")).toBe(5);
    for (const kind of ["success", "compute_infer", "cache_hit"])
      expect(time(kind)).toBeGreaterThan(0);
    // executions by batch size add up to the rows computed, and to the executions counted
    expect(rows).toBe(5);
    expect(after.execution_count - before.execution_count).toBe(runs);
    expect(after.execution_count - before.execution_count).toBeGreaterThanOrEqual(2);
    expect(after.last_inference).toBeGreaterThanOrEqual(started);
    // the model's and every model's lists carry the same version's numbers
    const model = await statsAt(stack, "/v2/models/digits/stats");
    expect(model.map((s) => s.version)).toEqual(["1", "2"]);
    expect(model[1]).toEqual(after);
    expect(
      (await statsAt(stack, "/v2/models/stats")).find(
        (s) => s.name === "digits" && s.version === version,
      ),
    ).toEqual(after);
    for (const missing of ["/v2/models/digits/versions/9/stats", "/v2/models/nope/stats"])
      expect((await fetch(stack.url(missing))).status).toBe(404);
    const server = (await (await fetch(stack.url("/v2"))).json()) as { extensions: string[] };
    expect(server.extensions).toContain("statistics");
  });
});
