import { hash } from "node:crypto";
import type { ModelEntry, ModelRepository } from "@ferry/model-repository";
import {
  DEFAULT_PRIORITY,
  encodeTensor,
  FerryError,
  type OutputTensor,
  type RowInputs,
  type RowResult,
} from "@ferry/protocol";
import type {
  CachedAnswer,
  CacheScope,
  InferenceClient,
  InferRequest,
  RowCache,
} from "@ferry/transport";
import type { CallOptions } from "../http/call.js";
import { beforeDeadline } from "../http/deadline.js";
import { wrongKind } from "../http/kind-routes.js";
import type { ApiMetrics } from "../metrics.js";
import { tensorBodyBytes } from "./body-budget.js";
import { fallbackEnabled, isModelFailure } from "./fallbacks.js";
import { HitRate } from "./hit-rate.js";
import { modelPrediction, type Prediction } from "./prediction.js";
import type { PredictBody } from "./schemas.js";
import type { TrafficRouter } from "./traffic-router.js";

/** A model version resolved for one request, with the rows it will send. */
export interface Plan {
  entry: ModelEntry;
  version: string;
  rows: RowInputs[];
}

/**
 * Turns HTTP-level requests into rows for the workers and their answers back into
 * responses. Validation happens here, so a bad input never reaches a worker.
 */
export class InferenceService {
  /** Per model: how often its cache answered lately (admission asks, see `admit`). */
  private readonly hitRates = new Map<string, HitRate>();

  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly metrics: ApiMetrics,
    private readonly router: TrafficRouter,
  ) {}

  planPredict(model: string, version: string | undefined, body: PredictBody): Plan {
    const { entry, version: v } = this.resolveClassifier(model, version);
    const spec = entry.config.inputs[0];
    if (!spec || entry.config.inputs.length !== 1) {
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${model}' takes several inputs; use /v2/models/${model}/infer`,
      );
    }
    const expected = spec.dims.reduce((a, b) => a * b, 1);
    if (body.features.length !== expected) {
      throw new FerryError(
        "INVALID_INPUT",
        `Expected ${expected} features, got ${body.features.length}`,
      );
    }
    return {
      entry,
      version: v,
      rows: [{ [spec.name]: encodeTensor(spec.datatype, body.features) }],
    };
  }

  /**
   * Admits a sync request from its route alone, before its body is read or parsed: under
   * overload the refusal (429) must cost next to nothing. Returns the version that will serve
   * it (drawn once: the split counts it once), and what gives its place in the queue back.
   */
  async admit(
    model: string,
    version: string | undefined,
    opts: { timeoutMs?: number | undefined; cache?: boolean | undefined },
  ): Promise<{ version: string; release: () => void }> {
    const { entry, version: v } = this.resolveRows(model, await this.routeVersion(model, version));
    const config = entry.config;
    // A cached answer needs no queue (Triton looks its response cache up before the queue
    // too): with the cache on, the request is only counted here, and refused after its
    // lookup missed, when its rows would be queued. Unless the cache has rarely answered
    // lately: then the lookup would cost every refusal far more than it saves.
    const lookFirst =
      config.cache?.enabled === true &&
      opts.cache !== false &&
      !this.hitRate(config.name).rarelyHits();
    const release = this.client.admit(
      config.name,
      v,
      config.max_queue_size,
      Date.now() + (opts.timeoutMs ?? config.default_timeout_ms),
      { refuse: !lookFirst },
    );
    return { version: v, release };
  }

  /**
   * The most bytes a body carrying `model`'s inputs may take (`tensorBodyBytes`); undefined for
   * a generator, a model with inputs of no fixed size, or a name this repository lacks.
   */
  maxBodyBytes(model: string): number | undefined {
    if (!this.repository.has(model)) return undefined;
    const { config } = this.repository.get(model);
    return config.kind === "generator" ? undefined : tensorBodyBytes(config);
  }

  /** The version a request is served by: the pinned one, else one drawn by the traffic split. */
  async routeVersion(model: string, version: string | undefined): Promise<string> {
    if (version !== undefined) return version;
    return this.router.pick(this.repository.get(model));
  }

  /**
   * A classifier answer: from the shared cache when fresh, else from the model; when the
   * model fails on a worker, from the last stored answer or the model's default (model.json).
   */
  predict(
    model: string,
    version: string | undefined,
    body: PredictBody,
    opts: CallOptions,
  ): Promise<Prediction> {
    const left = timeLeft(this.repository.get(model).config, opts);
    return left > 0 ? beforeDeadline(this.answer(model, version, body, opts), left) : expired();
  }

  /**
   * The body becomes its plan (rows encoded for the wire) as soon as the version is known,
   * and only the plan goes on: an async function's parameters stay on the heap until it
   * returns, so each request in flight kept its parsed body (784 numbers for mnist) through
   * every scavenge (a heap snapshot with 1,000 predicts in flight held 1,000 such arrays).
   */
  private answer(
    model: string,
    version: string | undefined,
    body: PredictBody,
    opts: CallOptions,
  ): Promise<Prediction> {
    const started = performance.now();
    return this.routeVersion(model, version).then((v) =>
      this.answerPlan(this.planPredict(model, v, body), opts, started),
    );
  }

  private async answerPlan(plan: Plan, opts: CallOptions, started: number): Promise<Prediction> {
    const config = plan.entry.config;
    const wantsCache = config.cache?.enabled === true && opts.cache !== false;
    const keep = wantsCache || fallbackEnabled(config);
    const scope = {
      model: config.name,
      version: plan.version,
      keepS: Math.max(config.cache?.ttl_s ?? 0, config.fallback?.keep_s ?? 0),
    };
    const generation = keep ? await this.client.state.generation(config.name) : 0;
    const hash = keep
      ? // a tenant's answers are its own: another key neither reads them nor learns they exist
        `${generation}.${opts.tenant.id}.${inputHash(plan.rows[0] ?? {})}`
      : "";
    // while a committed reload's generation has not moved, a stored answer may be the
    // replaced files' own: the model answers (and what it answers is kept, under the
    // generation that is about to be left behind)
    const cacheOn = wantsCache && !this.client.state.reloadCommitted(config.name);
    const elapsed = () => round2(performance.now() - started);
    try {
      let outputs: Record<string, OutputTensor> | undefined;
      if (cacheOn) {
        let hit: CachedAnswer<Prediction> | undefined;
        try {
          const looked = await this.runOrLookUp(plan, opts, {
            scope,
            ttlS: config.cache?.ttl_s ?? 0,
            inputHash: hash,
          });
          if ("hit" in looked) hit = looked.hit;
          else outputs = looked.outputs;
        } finally {
          // whatever followed a miss (an answer, a refusal, a failure), it was a miss
          this.metrics.cache.inc({ model: config.name, result: hit ? "hit" : "miss" });
          this.client.stats.recordCache(config.name, plan.version, hit !== undefined, elapsed());
          this.hitRate(config.name).record(hit !== undefined);
        }
        if (hit) return { ...hit.value, latency_ms: elapsed(), source: "cache" };
      } else [outputs] = await this.run(plan, opts);
      const answer = toPrediction(plan, outputs ?? {});
      this.client.stats.record(config.name, plan.version, elapsed(), false, opts);
      if (keep) this.client.cache.put(scope, hash, answer, config.cache?.max_entries ?? 100_000);
      return { ...answer, latency_ms: elapsed() };
    } catch (err) {
      this.client.stats.record(config.name, plan.version, elapsed(), true, opts);
      if (!fallbackEnabled(config) || !isModelFailure(err)) throw err;
      return this.fallback(plan, scope, hash, err as FerryError, elapsed);
    }
  }

  private async fallback(
    plan: Plan,
    scope: CacheScope,
    hash: string,
    cause: FerryError,
    elapsed: () => number,
  ): Promise<Prediction> {
    const config = plan.entry.config;
    const stored = await this.client.cache.get<Prediction>(scope, hash).catch(() => undefined);
    if (stored) {
      this.countFallback(config.name, "fallback_cache");
      return { ...stored.value, latency_ms: elapsed(), source: "fallback_cache" };
    }
    const prediction = config.fallback?.default_prediction;
    if (prediction !== undefined) {
      this.countFallback(config.name, "fallback_default");
      return {
        prediction,
        confidence: 0,
        latency_ms: elapsed(),
        model_version: plan.version,
        source: "fallback_default",
      };
    }
    this.countFallback(config.name, "none");
    throw new FerryError("UNAVAILABLE", `${cause.message}; no fallback answer for this input`, {
      retryAfterS: 1,
    });
  }

  private countFallback(model: string, source: string): void {
    this.metrics.fallbacks.inc({ model, source });
    this.client.stats.recordFallback(model, source);
  }

  /**
   * Runs a plan another protocol makes (v2 infer's tensors) on the classifier path: the
   * version routed as predict's is, the call's deadline, the version's stats. `plan` is called
   * once the version is known and `answer` once every row is back; neither is kept after.
   */
  runWithin<P extends Plan, T>(
    model: string,
    version: string | undefined,
    opts: CallOptions,
    plan: (version: string) => P,
    answer: (plan: P, rows: Array<Record<string, OutputTensor>>) => T,
  ): Promise<T> {
    const left = timeLeft(this.repository.get(model).config, opts);
    if (left <= 0) return expired();
    const started = performance.now();
    const answered = this.routeVersion(model, version).then((v) => {
      const planned = plan(v);
      return this.runCounted(planned, opts, started).then((rows) => answer(planned, rows));
    });
    return beforeDeadline(answered, left);
  }

  /** As `run`, counted in the version's stats. */
  private async runCounted(
    plan: Plan,
    opts: CallOptions,
    started: number,
  ): Promise<Array<Record<string, OutputTensor>>> {
    const model = plan.entry.config.name;
    const rows = await this.run(plan, opts).catch((err: unknown) => {
      this.client.stats.record(model, plan.version, performance.now() - started, true, opts);
      throw err;
    });
    this.client.stats.record(model, plan.version, performance.now() - started, false, opts);
    return rows;
  }

  /** Sends every row of a plan and waits for all; the first failing row fails the request. */
  private async run(plan: Plan, opts: CallOptions): Promise<Array<Record<string, OutputTensor>>> {
    const config = plan.entry.config;
    const base = this.request(plan, opts);
    const results = await Promise.all(
      plan.rows.map((inputs) => this.client.infer({ ...base, inputs })),
    );
    return results.map((r) => {
      if (r.ok) opts.timing?.row(r.timing);
      return this.unwrap(config.name, plan.version, r);
    });
  }

  /** A one-row plan, answered from the cache when it holds the row (see `inferOrLookUp`). */
  private async runOrLookUp(
    plan: Plan,
    opts: CallOptions,
    cache: RowCache,
  ): Promise<{ hit: CachedAnswer<Prediction> } | { outputs: Record<string, OutputTensor> }> {
    const inputs = plan.rows[0] ?? {};
    const looked = await this.client.inferOrLookUp<Prediction>(
      { ...this.request(plan, opts), inputs },
      cache,
    );
    if ("hit" in looked) {
      opts.timing?.cached();
      return looked;
    }
    if (looked.result.ok) opts.timing?.row(looked.result.timing);
    return { outputs: this.unwrap(plan.entry.config.name, plan.version, looked.result) };
  }

  /** What every row of a plan is sent with; from here on the rows count themselves. */
  private request(plan: Plan, opts: CallOptions): Omit<InferRequest, "inputs"> {
    const config = plan.entry.config;
    opts.releaseAdmission?.();
    return {
      model: config.name,
      version: plan.version,
      deadline: Date.now() + timeLeft(config, opts),
      priority: opts.priority ?? DEFAULT_PRIORITY,
      maxRowsPerJob: config.max_batch_size,
      maxQueueSize: config.max_queue_size,
      // the worker's spans join the request's trace (nothing when tracing is off)
      trace: opts.trace,
    };
  }

  /** A plan with no rows, for rendering a stored result of `model` at `version`. */
  planFor(model: string, version: string): Plan {
    return { ...this.repository.resolve(model, version), rows: [] };
  }

  unwrap(model: string, version: string, result: RowResult): Record<string, OutputTensor> {
    if (!result.ok) {
      this.metrics.inferences.inc({ model, version, outcome: result.error.code.toLowerCase() });
      throw new FerryError(result.error.code, result.error.message);
    }
    this.metrics.inferences.inc({ model, version, outcome: "ok" });
    this.metrics.observeRow(model, version, result.timing);
    return result.outputs;
  }

  private hitRate(model: string): HitRate {
    let rate = this.hitRates.get(model);
    if (!rate) {
      rate = new HitRate();
      this.hitRates.set(model, rate);
    }
    return rate;
  }

  resolveClassifier(model: string, version: string | undefined) {
    const resolved = this.repository.resolve(model, version);
    const kind = resolved.entry.config.kind;
    if (kind !== "classifier") {
      throw new FerryError("INVALID_INPUT", wrongKind(model, kind));
    }
    return resolved;
  }

  /** A model whose requests are sync-lane rows: a classifier's, or an embedder's (v2 infer). */
  resolveRows(model: string, version: string | undefined) {
    const resolved = this.repository.resolve(model, version);
    if (resolved.entry.config.kind === "generator")
      throw new FerryError("INVALID_INPUT", wrongKind(model, "generator"));
    return resolved;
  }
}

/** The class, and its probability, from the first output's logits. */
export function toPrediction(plan: Plan, outputs: Record<string, OutputTensor>): Prediction {
  const name = plan.entry.config.outputs[0]?.name ?? "";
  return modelPrediction(outputs[name]?.data ?? [], plan.version, 0);
}

/** Names an input for the cache: a hash of its encoded tensors, in input order. */
function inputHash(row: RowInputs): string {
  let text = "";
  for (const [name, encoded] of Object.entries(row)) text += `${name}\u0000${encoded}\u0000`;
  // one-shot: a Hash object per request cost as much as the hashing itself
  return hash("sha256", text, "base64url");
}

/** What is left of a call's deadline, in ms: its timeout less what it waited in the API. */
function timeLeft(config: ModelEntry["config"], opts: CallOptions): number {
  return (opts.timeoutMs ?? config.default_timeout_ms) - (opts.waitedMs ?? 0);
}

/** A call whose deadline passed while it waited in the API: nothing is sent to a worker. */
function expired(): Promise<never> {
  return Promise.reject(
    new FerryError("DEADLINE_EXCEEDED", "deadline passed while the request waited in the API"),
  );
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
