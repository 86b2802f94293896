import { createRedis, isCluster, primaries } from "@ferry/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalCluster, startLocalCluster } from "../scripts/redis-cluster.js";
import { tempRepository } from "./helpers/model-repo.js";
import { referenceGreedy } from "./helpers/reference-lm.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { readSse } from "./helpers/sse.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Ferry on a Redis Cluster of 3 primaries + 3 replicas (Debian's redis-server), chosen by
// configuration alone (REDIS_CLUSTER_NODES): the core cases, where the keys land, and a
// primary SIGKILLed under steady load. Every answer is checked against in-process references;
// the cache and the fallbacks are off, so each one is the model's.
const repo = tempRepository({
  digits: { fallback: { enabled: false }, cache: { enabled: false } },
  "tiny-lm": {},
});
let cluster: LocalCluster;
let stack: Stack;
beforeAll(async () => {
  cluster = await startLocalCluster({ nodeTimeoutMs: 1_000 });
  stack = new Stack({
    redis: { url: "redis://127.0.0.1", clusterNodes: cluster.nodes.split(",") },
    env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm", ACCEPT_REPLICAS: "1" },
  });
  await stack.start();
});
afterAll(async () => {
  await stack?.stop();
  cluster?.stop();
});

const rows = samples.digits.inputs.slice(0, 16);
const PROMPT = "Once upon a time";
const MAX_TOKENS = 48;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface JobView {
  status: string;
  result: { prediction?: number; model_version?: string; text?: string } | null;
  error: unknown;
}
/** A poll's view of a job; undefined when the poll itself failed (a 503 while a shard fails over). */
const getJob = async (id: string) => {
  const res = await fetch(stack.url(`/v1/jobs/${id}`));
  return res.status === 200 ? ((await res.json()) as JobView) : undefined;
};

/** Polls a job to its end; undefined when it is not over within `giveUpMs`. */
async function settle(id: string, giveUpMs = 60_000): Promise<JobView | undefined> {
  const until = Date.now() + giveUpMs;
  while (Date.now() < until) {
    const view = await getJob(id).catch(() => undefined);
    if (view && view.status !== "queued" && view.status !== "running") return view;
    await sleep(100);
  }
  return undefined;
}

interface StreamRead {
  tokens: string;
  ids: string[];
  dones: number;
  reconnects: number;
}

/**
 * Reads a job's event stream to its `done` as an EventSource would: a stream that ends early
 * or fails is opened again with Last-Event-ID. Gives up after `giveUpMs` even in the middle of
 * a connection that stays open and silent, so that a lost stream fails the test with its
 * counts rather than hangs it.
 */
async function follow(id: string, giveUpMs = 60_000): Promise<StreamRead> {
  const read: StreamRead = { tokens: "", ids: [], dones: 0, reconnects: -1 };
  const until = Date.now() + giveUpMs;
  while (read.dones === 0 && Date.now() < until) {
    read.reconnects++;
    const last = read.ids.at(-1);
    try {
      const res = await fetch(stack.url(`/v1/jobs/${id}/events`), {
        headers: last ? { "Last-Event-ID": last } : {},
        signal: AbortSignal.timeout(Math.max(1, until - Date.now())),
      });
      if (res.status !== 200) {
        await sleep(200);
        continue;
      }
      await readSse(res, (e) => {
        if (e.id) read.ids.push(e.id);
        if (e.event === "token") read.tokens += (JSON.parse(e.data) as { text: string }).text;
        if (e.event === "done") read.dones++;
        return undefined;
      });
    } catch {
      await sleep(200);
    }
  }
  return read;
}

describe("Ferry on a Redis Cluster (3 primaries, 3 replicas)", () => {
  it("answers predict, v2 infer, async jobs and batches exactly as on one Redis", async () => {
    const reference = {
      "1": (await referenceLogits("digits", "1", rows)).map(argmax),
      "2": (await referenceLogits("digits", "2", rows)).map(argmax),
    };
    const predicted = await Promise.all(
      rows.map(async (features) => {
        const res = await stack.post("/v1/models/digits/predict", { features });
        expect(res.status).toBe(200);
        return (await res.json()) as { prediction: number; model_version: "1" | "2" };
      }),
    );
    for (const [k, p] of predicted.entries())
      expect(p.prediction).toBe(reference[p.model_version][k]);

    const v2 = await stack.post("/v2/models/digits/versions/1/infer", {
      inputs: [{ name: "input", shape: [4, 64], datatype: "FP32", data: rows.slice(0, 4).flat() }],
    });
    expect(v2.status).toBe(200);
    const logits = ((await v2.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data;
    for (let r = 0; r < 4; r++)
      expect(argmax(logits?.slice(r * 10, r * 10 + 10) ?? [])).toBe(reference["1"][r]);

    const submitted = await stack.post("/v1/jobs", {
      model: "digits",
      input: { features: rows[3] },
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const job = await settle(((await submitted.json()) as { id: string }).id);
    expect(job?.status).toBe("succeeded");
    const version = job?.result?.model_version as "1" | "2";
    expect(job?.result?.prediction).toBe(reference[version][3]);

    const items = rows.map((features, k) => ({ key: `user-${k}`, features }));
    const batch = await stack.post("/v1/batches", { model: "digits", items });
    expect(batch.status).toBe(202);
    const { id } = (await batch.json()) as { id: string };
    await stack.batchCompleted(id, 30_000);
    const lines = (await (await fetch(stack.url(`/v1/batches/${id}/results`))).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { key: string; prediction: number; model_version: string });
    expect(lines).toHaveLength(rows.length);
    for (const line of lines) {
      const v = line.model_version as "1" | "2";
      expect(line.prediction).toBe(reference[v][Number(line.key.slice(5))]);
    }
    const stored = await fetch(stack.url("/v1/predictions/digits/user-7"));
    expect(((await stored.json()) as { prediction: number }).prediction).toBe(
      reference[lines[0]?.model_version as "1" | "2"][7],
    );
  });

  it("a streamed completion's events, dropped mid-way and resumed with Last-Event-ID, are exactly the rest", async () => {
    const res = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0 },
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const seen: string[] = [];
    let text = "";
    const first = new AbortController();
    await readSse(
      await fetch(stack.url(`/v1/jobs/${id}/events`), { signal: first.signal }),
      (e) => {
        seen.push(e.id ?? "");
        if (e.event === "token") text += (JSON.parse(e.data) as { text: string }).text;
        return seen.length >= 4 ? "stop" : undefined;
      },
      first,
    );
    const rest = await follow(id);
    expect(rest.reconnects).toBe(0);
    const resumed = await fetch(stack.url(`/v1/jobs/${id}/events`), {
      headers: { "Last-Event-ID": seen.at(-1) ?? "" },
    });
    const after: string[] = [];
    await readSse(resumed, (e) => {
      after.push(e.id ?? "");
      if (e.event === "token") text += (JSON.parse(e.data) as { text: string }).text;
      return undefined;
    });
    expect(new Set([...seen, ...after]).size).toBe(seen.length + after.length);
    expect(text).toBe(await referenceGreedy(PROMPT, MAX_TOKENS));
  });

  it("an Idempotency-Key's retry gets the same job, and another payload under it a 422", async () => {
    const key = `cluster-${Date.now()}`;
    const submit = (features: number[]) =>
      fetch(stack.url("/v1/jobs"), {
        method: "POST",
        headers: { "content-type": "application/json", "Idempotency-Key": key },
        body: JSON.stringify({ model: "digits", input: { features } }),
      });
    const first = await submit(rows[0] ?? []);
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    const retry = await submit(rows[0] ?? []);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(((await retry.json()) as { id: string }).id).toBe(id);
    expect((await submit(rows[1] ?? [])).status).toBe(422);
  });

  it("keeps each model version's keys on one slot, and spreads the queues over the shards", async () => {
    // a few jobs of each kind: their index keys are tagged by their random ids
    for (const [model, input] of [
      ["digits", { features: rows[0] }],
      ["tiny-lm", { prompt: PROMPT, max_tokens: 4 }],
    ] as const)
      for (let k = 0; k < 4; k++) {
        const res = await stack.post("/v1/jobs", { model, input });
        expect((await settle(((await res.json()) as { id: string }).id))?.status).toBe("succeeded");
      }
    const redis = createRedis({ url: "redis://127.0.0.1", clusterNodes: cluster.nodes.split(",") });
    try {
      if (!isCluster(redis)) throw new Error("not a cluster client");
      const byNode = new Map<string, string[]>();
      for (const node of await primaries(redis)) {
        const keys: string[] = [];
        let cursor = "0";
        do {
          const [next, found] = await node.scan(cursor, "MATCH", `${stack.prefix}:*`, "COUNT", 500);
          cursor = next;
          keys.push(...found);
        } while (cursor !== "0");
        byNode.set(`${node.options.port}`, keys);
      }
      const all = [...byNode.values()].flat();
      // BullMQ's keys of a queue, its sync lane and its jobs' event logs: one tag, one slot
      for (const queue of ["digits.v1", "digits.v2", "tiny-lm.v1"]) {
        const tagged = all.filter((k) => k.includes(`{${queue}}`));
        expect(tagged.some((k) => k.endsWith(":meta"))).toBe(true);
        const slots = new Set(
          await Promise.all(tagged.map((k) => redis.cluster("KEYSLOT", k) as Promise<number>)),
        );
        expect(slots.size, queue).toBe(1);
      }
      // what was written above lands on more than one shard
      expect([...byNode.values()].filter((keys) => keys.length > 0).length).toBeGreaterThan(1);
      // the queue depth KEDA scales workers on is counted from whichever shard holds a queue
      const metrics = await (await fetch(stack.url("/metrics"))).text();
      for (const queue of ["digits.v1", "digits.v2", "tiny-lm.v1"])
        expect(metrics).toMatch(
          new RegExp(`ferry_queue_waiting_jobs\\{[^}]*queue="${queue}"[^}]*\\} 0`),
        );
    } finally {
      redis.disconnect();
    }
  });

  it("a primary SIGKILLed under steady load: no accepted job lost or computed twice, every stream exact", async () => {
    const reference = {
      "1": (await referenceLogits("digits", "1", rows)).map(argmax),
      "2": (await referenceLogits("digits", "2", rows)).map(argmax),
    };
    const greedy = await referenceGreedy(PROMPT, MAX_TOKENS);
    // the shard of the completions' queue: its async jobs, their event logs and sync lane die
    const victim = cluster.primaryFor(`${stack.prefix}:{tiny-lm.v1}:meta`);
    const counts = {
      jobs: { sent: 0, accepted: 0, completed: 0, lost: 0, duplicated: 0, wrong: 0 },
      streams: {
        sent: 0,
        accepted: 0,
        completed: 0,
        lost: 0,
        duplicated: 0,
        wrong: 0,
        resumed: 0,
      },
      predicts: { sent: 0, answered: 0, wrong: 0, refused: 0 },
    };
    const problems: string[] = [];
    let stopping = false;
    let killedAt = 0;
    let restartedAt = 0;
    let acceptedAfterRestart = 0;
    /** Submits a job, counting it sent and, on a 202, accepted; its id, or undefined. */
    const submit = async (kind: { sent: number; accepted: number }, body: unknown) => {
      kind.sent++;
      const res = await stack.post("/v1/jobs", body).catch(() => undefined);
      if (res?.status !== 202) {
        await sleep(100);
        return undefined;
      }
      kind.accepted++;
      if (restartedAt && Date.now() > restartedAt) acceptedAfterRestart++;
      return ((await res.json()) as { id: string }).id;
    };

    const jobLoop = async (offset: number) => {
      for (let k = offset; !stopping; k++) {
        const id = await submit(counts.jobs, {
          model: "digits",
          input: { features: rows[k % rows.length] },
        });
        if (!id) continue;
        const view = await settle(id);
        const version = view?.result?.model_version as "1" | "2" | undefined;
        if (view?.status !== "succeeded") {
          counts.jobs.lost++;
          problems.push(`job ${id}: ${JSON.stringify(view)}`);
        } else if (!version || view.result?.prediction !== reference[version][k % rows.length]) {
          counts.jobs.wrong++;
          problems.push(`job ${id}: ${JSON.stringify(view)}`);
        } else counts.jobs.completed++;
      }
    };
    const streamLoop = async () => {
      while (!stopping) {
        const id = await submit(counts.streams, {
          model: "tiny-lm",
          input: { prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0 },
        });
        if (!id) continue;
        const read = await follow(id);
        counts.streams.resumed += read.reconnects;
        const distinct = new Set(read.ids).size === read.ids.length;
        if (read.dones === 0) counts.streams.lost++;
        else if (!distinct || read.dones > 1 || read.tokens.length > greedy.length)
          counts.streams.duplicated++;
        else if (read.tokens !== greedy) counts.streams.wrong++;
        else counts.streams.completed++;
        if (read.tokens !== greedy || !distinct) {
          // what the job itself says tells a log that lost its end from a job that never ended
          const view = await getJob(id).catch(() => undefined);
          problems.push(`stream ${id}: ${JSON.stringify(read)} job: ${JSON.stringify(view)}`);
        }
      }
    };
    const predictLoop = async (offset: number) => {
      for (let k = offset; !stopping; k++) {
        counts.predicts.sent++;
        const res = await stack
          .post("/v1/models/digits/predict", { features: rows[k % rows.length] })
          .catch(() => undefined);
        if (res?.status !== 200) {
          counts.predicts.refused++;
          await sleep(100);
          continue;
        }
        const p = (await res.json()) as { prediction: number; model_version: "1" | "2" };
        if (p.prediction === reference[p.model_version][k % rows.length])
          counts.predicts.answered++;
        else counts.predicts.wrong++;
      }
    };
    const loops = [jobLoop(0), jobLoop(7), streamLoop(), streamLoop(), predictLoop(3)];
    await sleep(4_000);
    killedAt = Date.now();
    cluster.kill(victim);
    // the replica takes over after cluster-node-timeout (1 s) and an election
    await waitFor(async () => cluster.primaries().length === 3, 20_000);
    const failoverMs = Date.now() - killedAt;
    // the promoted replica has no replica of its own, so no accept on its shard can be made
    // durable (503s) until the old primary comes back as its replica, as a restarted pod does
    await sleep(2_000);
    await cluster.restart(victim);
    restartedAt = Date.now();
    await sleep(4_000);
    stopping = true;
    await Promise.all(loops);
    console.log(
      `redis-cluster failover: primary :${victim} killed, replica promoted after ${failoverMs} ms, ` +
        `old primary back as a replica ${restartedAt - killedAt} ms after the kill\n` +
        `${JSON.stringify(counts)}\n${problems.slice(0, 8).join("\n")}`,
    );
    for (const kind of [counts.jobs, counts.streams]) {
      expect(kind.lost).toBe(0);
      expect(kind.duplicated).toBe(0);
      expect(kind.wrong).toBe(0);
      expect(kind.completed).toBe(kind.accepted);
    }
    expect(counts.predicts.wrong).toBe(0);
    // service came back on the promoted replica
    expect(acceptedAfterRestart).toBeGreaterThan(0);
    expect(counts.streams.accepted).toBeGreaterThan(2);
  }, 120_000);
});
