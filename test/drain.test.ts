import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { EXIT_CONFIG } from "@ferry/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { tempRepository } from "./helpers/model-repo.js";
import { eachKey } from "./helpers/redis-keys.js";
import { samples } from "./helpers/samples.js";
import { readSse } from "./helpers/sse.js";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm" } });
let secondUrl = "";
beforeAll(async () => {
  await stack.start();
  secondUrl = (await stack.startApiReplica()).url;
});
afterAll(() => stack.stop());

/** Workers serving digits' default version, as the API replica left up reports them. */
async function digitsWorkers(): Promise<number | undefined> {
  type Health = { models: Record<string, { workers: number }> };
  return ((await (await fetch(`${secondUrl}/health`)).json()) as Health).models.digits?.workers;
}

describe("graceful drain", () => {
  it("an API replica told to stop ends its event streams; the client resumes on another replica and misses no token", async () => {
    const res = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: {
        prompt: "It was a dark and stormy night",
        max_tokens: 200,
        temperature: 0.7,
        seed: 5,
        ignore_eos: true,
      },
    });
    const { id } = (await res.json()) as { id: string };
    // a background response streamed from the same replica: resumed by its sequence numbers
    type ResponseEvent = { type: string; sequence_number?: number; message?: string } & Record<
      string,
      unknown
    >;
    const told: ResponseEvent[] = [];
    const response = await stack.post("/v1/responses", {
      model: "tiny-lm",
      input: "Tell me a long story.",
      max_output_tokens: 120,
      temperature: 0.7,
      background: true,
      stream: true,
    });
    const responseRead = readSse(response, (e) => {
      told.push(JSON.parse(e.data) as ResponseEvent);
      return undefined;
    });
    const events: Array<{ id: string; type: string; data: string }> = [];
    const first = await fetch(stack.url(`/v1/jobs/${id}/events`));
    let drained = false;
    const reading = readSse(first, (e) => {
      events.push({ id: e.id ?? "", type: e.event ?? "", data: e.data });
      // both streams under way (the response's, unless it has already ended)
      const responding =
        told.some(
          (x) => x.type === "response.output_text.delta" || x.type === "response.completed",
        ) || told.some((x) => x.type === "response.incomplete");
      if (!drained && responding && events.filter((x) => x.type === "token").length >= 5) {
        drained = true;
        stack.api.child.kill("SIGTERM");
      }
      return undefined;
    });
    await reading;
    // the stream ended before the job did: the client has to resume
    expect(events.at(-1)?.type).not.toBe("done");
    expect(await stack.api.exited).toBe(0);

    const resumed = await fetch(`${secondUrl}/v1/jobs/${id}/events`, {
      headers: { "Last-Event-ID": events.at(-1)?.id ?? "" },
    });
    await readSse(resumed, (e) => {
      events.push({ id: e.id ?? "", type: e.event ?? "", data: e.data });
      return undefined;
    });
    const ids = events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(events.at(-1)?.type).toBe("done");
    const text = events
      .filter((e) => e.type === "token")
      .map((e) => (JSON.parse(e.data) as { text: string }).text)
      .join("");
    const result = JSON.parse(events.find((e) => e.type === "result")?.data ?? "{}") as {
      result: { text: string; usage: { completion_tokens: number } };
    };
    expect(text).toBe(result.result.text);
    expect(result.result.usage.completion_tokens).toBe(200);

    // the response's stream ended with where to resume; read from there on the other replica
    await responseRead;
    // (a response that ended before the drain, at its end-of-text, has nothing to resume)
    if (told.at(-1)?.type === "error") {
      const end = told.pop();
      const after = Number(/starting_after=(\d+)/.exec(end?.message ?? "")?.[1]);
      expect(after).toBe(told.at(-1)?.sequence_number);
      const responseId = (told[0]?.response as { id: string } | undefined)?.id;
      const again = await fetch(
        `${secondUrl}/v1/responses/${responseId}?stream=true&starting_after=${after}`,
      );
      await readSse(again, (e) => {
        told.push(JSON.parse(e.data) as ResponseEvent);
        return undefined;
      });
    }
    expect(told.map((e) => e.sequence_number)).toEqual(told.map((_, i) => i));
    const last = told.at(-1) as {
      type: string;
      response: { output: Array<{ content: Array<{ text: string }> }> };
    };
    expect(["response.completed", "response.incomplete"]).toContain(last.type);
    const deltas = told
      .map((e) => (e.type === "response.output_text.delta" ? (e.delta as string) : ""))
      .join("");
    expect(deltas).toBe(last.response.output[0]?.content[0]?.text);
  });

  it("a store:false response a drain ends is cancelled and says so: nothing of it can be followed or read", async () => {
    const worker = stack.workers[0]?.child;
    const body = { model: "tiny-lm", input: "Tell me a long story.", store: false, stream: true };
    // before its first token (the worker held): a 503 that says send it again
    const early = await stack.startApiReplica({ DRAIN_TIMEOUT_MS: "1000" });
    worker?.kill("SIGSTOP");
    try {
      const pending = fetch(`${early.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      early.proc.child.kill("SIGTERM");
      const refused = await pending;
      expect(refused.status).toBe(503);
      const jobId = refused.headers.get("x-job-id") ?? "";
      const message = ((await refused.json()) as { error: { message: string } }).error.message;
      // before, it said the job goes on and where to follow it: it was cancelled and forgotten
      expect(message).toMatch(/not stored \(store: false\), so it was cancelled: send it again/);
      expect(message).not.toMatch(/follow/);
      expect(jobId).not.toBe("");
      expect((await fetch(`${secondUrl}/v1/jobs/${jobId}`)).status).toBe(404);
    } finally {
      worker?.kill("SIGCONT");
    }
    // under way (the worker held once its first words are out): a JSON format 180 characters
    // long keeps it going well past the moment the stream opens
    const late = await stack.startApiReplica({ DRAIN_TIMEOUT_MS: "1000" });
    const told: Array<{ type: string; message?: string }> = [];
    const story = {
      type: "object",
      properties: { story: { type: "string", minLength: 180 } },
      required: ["story"],
      additionalProperties: false,
    };
    const res = await fetch(`${late.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...body,
        max_output_tokens: 220,
        text: { format: { type: "json_schema", name: "story", schema: story } },
      }),
    });
    worker?.kill("SIGSTOP");
    late.proc.child.kill("SIGTERM");
    const jobId = res.headers.get("x-job-id") ?? "";
    try {
      await readSse(res, (e) => {
        told.push(JSON.parse(e.data) as { type: string; message?: string });
        return undefined;
      });
      // held on past the drain's own time: its forget waits for the worker to let go
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    } finally {
      worker?.kill("SIGCONT");
    }
    expect(told.at(-1)?.type).toBe("error");
    expect(told.at(-1)?.message).toMatch(/not stored \(store: false\), so it was cancelled/);
    expect(told.at(-1)?.message).not.toMatch(/read it at|follow/);
    expect((await fetch(`${secondUrl}/v1/jobs/${jobId}`)).status).toBe(404);
    // the drain waited for its forget (the job taken by a worker that let go once it ran
    // again): nothing of it stays but the cancel's mark, where the exit had left its log and
    // its BullMQ hash, prompt and all, for an hour
    expect(await late.proc.exited).toBe(0);
    const left: string[] = [];
    await eachKey(stack.prefix, `*${jobId}*`, (_node, key) => {
      if (!key.includes(":cancelled:")) left.push(key);
    });
    expect(left).toEqual([]);
  });

  it("a store:false stream hands its slot back as it ends, not once its job is forgotten", async () => {
    const worker = stack.workers[0]?.child;
    const one = await stack.startApiReplica({ MAX_STREAMS_PER_KEY: "1" });
    const stream = (signal?: AbortSignal) =>
      fetch(`${one.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "tiny-lm",
          input: "Tell me a long story.",
          store: false,
          stream: true,
          max_output_tokens: 100,
        }),
        ...(signal ? { signal } : {}),
      });
    const leaving = new AbortController();
    const first = await stream(leaving.signal);
    expect(first.status).toBe(200);
    // its worker held: the forget that follows the client's leaving waits for it to let go
    worker?.kill("SIGSTOP");
    let second: Promise<Response> | undefined;
    try {
      leaving.abort();
      await new Promise((resolve) => setTimeout(resolve, 200));
      second = stream();
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      worker?.kill("SIGCONT");
    }
    // before, the slot was held through the forget: 429 "Too many open streams for this key"
    const next = await second;
    expect(next?.status).toBe(200);
    await next?.text();
  });

  it("a worker told to stop while it still loads drains and exits; each model was advertised as it came up", async () => {
    // digits loads first (the repository's order), tiny-lm after it, for most of a second
    const worker = stack.launchWorker({
      WORKER_MODELS: "digits,tiny-lm",
      WORKER_PORT: "0",
      LOG_LEVEL: "info",
    });
    const output = () => worker.output.join("");
    try {
      // listed while the worker still loads: before, only once every model had loaded
      await waitFor(async () => (await digitsWorkers()) === 1, 30_000, worker);
      const predict = await fetch(`${secondUrl}/v1/models/digits/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ features: samples.digits.inputs[0] }),
      });
      expect(predict.status).toBe(200);
      expect(output()).not.toMatch(/"worker ready"/);
      // before, the signal killed it at once (the handlers came after the load), holding
      // whatever its served models had taken until their locks lapsed
      worker.child.kill("SIGTERM");
      expect(await worker.exited).toBe(0);
      expect(output()).toMatch(/"worker stopped"/);
      // what finished loading after the signal never served
      expect(output()).not.toMatch(/"model":"tiny-lm"[^\n]*"serving"/);
      expect(await digitsWorkers()).toBe(0);
    } finally {
      // a failed run's worker must not take the next test's jobs
      if (!exited(worker.child)) worker.child.kill("SIGKILL");
    }
  });

  it("a worker whose start fails on a later model leaves nothing behind: the models it served are drained and it is not listed", async () => {
    const repo = tempRepository({ digits: {}, "tiny-lm": {} });
    writeFileSync(join(repo, "tiny-lm/1/model.onnx"), "not an onnx file");
    const worker = stack.launchWorker({ MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm" });
    try {
      expect(await worker.exited).toBe(EXIT_CONFIG);
      expect(worker.output.join("")).toMatch(/ferry: the worker cannot serve its models/);
      // before, digits (served, and listed, while tiny-lm loaded) stayed listed until the
      // heartbeat expired
      expect(await digitsWorkers()).toBe(0);
    } finally {
      if (!exited(worker.child)) worker.child.kill("SIGKILL");
    }
  });

  it("a worker whose WORKER_PORT is taken exits before it joins the list or takes a job", async () => {
    const taken = createServer().listen(0, "0.0.0.0");
    await once(taken, "listening");
    const port = (taken.address() as AddressInfo).port;
    const worker = stack.launchWorker({ WORKER_MODELS: "digits", WORKER_PORT: String(port) });
    try {
      expect(await worker.exited).toBe(EXIT_CONFIG);
      const output = worker.output.join("");
      expect(output).toContain(`ferry: WORKER_PORT ${port} is already in use`);
      // before, it loaded its models, served, said so, and only then found the port taken
      expect(output).not.toMatch(/"worker ready"|"serving"/);
      expect(await digitsWorkers()).toBe(0);
    } finally {
      taken.close();
      if (!exited(worker.child)) worker.child.kill("SIGKILL");
    }
  });

  it("a worker told to stop finishes the generations it holds before it exits", async () => {
    const submit = async () => {
      const res = await fetch(`${secondUrl}/v1/jobs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "tiny-lm",
          input: { prompt: "Hello", max_tokens: 120, temperature: 0.8, ignore_eos: true },
        }),
      });
      return ((await res.json()) as { id: string }).id;
    };
    const ids = await Promise.all(Array.from({ length: 4 }, submit));
    const view = async (id: string) =>
      (await (await fetch(`${secondUrl}/v1/jobs/${id}`)).json()) as { status: string };
    await waitFor(
      async () => (await Promise.all(ids.map(view))).every((j) => j.status === "running"),
      15_000,
    );
    const worker = stack.workers[0];
    worker?.child.kill("SIGTERM");
    expect(await worker?.exited).toBe(0);
    const after = await Promise.all(ids.map(view));
    expect(after.map((j) => j.status)).toEqual([
      "succeeded",
      "succeeded",
      "succeeded",
      "succeeded",
    ]);
  });
});
