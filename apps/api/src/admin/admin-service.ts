import type { ModelEntry, ModelRepository } from "@ferry/model-repository";
import { FerryError, messageOf, queueName, type ReloadOutcome } from "@ferry/protocol";
import type { InferenceClient, RecentActivity } from "@ferry/transport";
import type { Logger } from "pino";
import type { TrafficRouter } from "../inference/traffic-router.js";
import type { ApiMetrics } from "../metrics.js";

export interface VersionAdminView {
  requests: number;
  errors: number;
  error_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
}

/** What /admin shows of a model: versions, split, and the shared per-version statistics. */
export interface ModelAdminView {
  name: string;
  kind: string;
  versions: string[];
  stable_version: string;
  traffic: Record<string, number>;
  stats: Record<string, VersionAdminView>;
  cache: { hits: number; misses: number; hit_rate: number | null };
  fallbacks: Record<string, number>;
}

/** One model version as the dashboard shows it. */
export interface VersionDashboard {
  version: string;
  queue: Record<string, number>;
  workers: number;
  traffic_percent: number;
  requests: number;
  errors: number;
  /** Rows per executed batch, counted by this API replica: upper bound -> rows. */
  batch_sizes: Record<string, number>;
  /** The last minutes, from every replica and worker: series, quantiles, slowest requests. */
  recent: RecentActivity;
}

/** Operators' actions: canary splits, rollback, reloads, and the view of every model. */
export class AdminService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly log: Logger,
    private readonly metrics: ApiMetrics,
    private readonly router: TrafficRouter,
  ) {}

  /**
   * What /dashboard polls: every model version's queue, workers, split, batches, and its last
   * minutes (requests/s, queue depth, latency quantiles, tokens/s, slowest requests).
   */
  async dashboard(): Promise<{
    at: number;
    models: Array<{ name: string; kind: string; versions: VersionDashboard[] }>;
  }> {
    const [workers, batches] = await Promise.all([
      this.client.workers.perQueue(),
      this.batchSizes(),
    ]);
    // this replica's counts join the shared ones once per view, not once per model
    await this.client.stats.flush();
    const models = await Promise.all(
      this.repository.list().map(async (entry) => {
        const view = await this.describe(entry.config.name);
        const versions = await Promise.all(
          entry.versions.map(async (version) => {
            const queue = queueName(entry.config.name, version);
            const stats = view.stats[version];
            const [counts, recent] = await Promise.all([
              this.client.depth.counts(queue),
              this.client.activity.read(queue),
            ]);
            return {
              version,
              queue: counts,
              workers: workers.get(queue) ?? 0,
              traffic_percent: view.traffic[version] ?? 0,
              requests: stats?.requests ?? 0,
              errors: stats?.errors ?? 0,
              batch_sizes: batches.get(queue) ?? {},
              recent,
            };
          }),
        );
        return { name: entry.config.name, kind: entry.config.kind, versions };
      }),
    );
    return { at: Date.now(), models };
  }

  /** Rows per batch size bucket, per queue, from this replica's histogram (not cumulative). */
  private async batchSizes(): Promise<Map<string, Record<string, number>>> {
    const out = new Map<string, Record<string, number>>();
    const metric = await this.metrics.batchSize.get();
    const byQueue = new Map<string, Array<[number, number]>>();
    for (const v of metric.values) {
      const le = (v.labels as Record<string, string | number | undefined>).le;
      if (!v.metricName?.endsWith("_bucket") || le === undefined) continue;
      const queue = queueName(String(v.labels.model), String(v.labels.version));
      byQueue.set(queue, [
        ...(byQueue.get(queue) ?? []),
        [le === "+Inf" ? Infinity : Number(le), v.value],
      ]);
    }
    for (const [queue, buckets] of byQueue) {
      buckets.sort((a, b) => a[0] - b[0]);
      const row: Record<string, number> = {};
      let below = 0;
      for (const [le, cumulative] of buckets) {
        if (cumulative - below > 0)
          row[Number.isFinite(le) ? `<=${le}` : ">128"] = cumulative - below;
        below = cumulative;
      }
      out.set(queue, row);
    }
    return out;
  }

  async models(): Promise<ModelAdminView[]> {
    await this.client.stats.flush();
    return Promise.all(this.repository.list().map((m) => this.describe(m.config.name)));
  }

  async setTraffic(name: string, split: Record<string, number>): Promise<ModelAdminView> {
    const entry = this.repository.get(name);
    await this.client.state.setTraffic(name, this.router.validate(entry, split));
    this.log.info({ model: name, traffic: split }, "traffic split changed");
    await this.client.stats.flush();
    return this.describe(name);
  }

  /** All traffic back to the stable version in one move. */
  async rollback(name: string): Promise<ModelAdminView> {
    const entry = this.repository.get(name);
    await this.client.state.setTraffic(name, { [entry.defaultVersion]: 100 });
    this.log.warn(
      { model: name, version: entry.defaultVersion },
      "rolled back to the stable version",
    );
    return this.describe(name);
  }

  /**
   * Every worker reloads `name` from the repository; a version any worker refuses leaves the
   * previous files serving everywhere, and this API's view unchanged.
   */
  async reload(
    name: string,
  ): Promise<{ model: string; versions: string[]; workers: ReloadOutcome[] }> {
    let entry: ModelEntry;
    try {
      entry = await this.repository.rereadModel(name);
    } catch (err) {
      if (err instanceof FerryError) throw err;
      throw new FerryError("INVALID_INPUT", `Repository refused: ${messageOf(err)}`);
    }
    const live = async () => (await this.client.workers.live()).map((w) => w.id);
    const { answers: workers, decide } = await this.client.control.requestReload(name, live);
    const failures = workers.flatMap((w) =>
      w.failed.map((f) => `${w.worker}: version ${f.version}: ${f.error}`),
    );
    this.log.info({ model: name, workers: workers.length, failures: failures.length }, "reload");
    // every worker swaps what it loaded, or none does: one serving new files another refused
    // would answer a version two ways
    await decide(failures.length === 0);
    if (failures.length > 0) {
      throw new FerryError(
        "INVALID_INPUT",
        `Reload of '${name}' refused; the previous files keep serving. ${failures.join("; ")}`,
      );
    }
    // Only now does this API route to what the workers accepted: a refused new version is
    // never listed, nor made the default, here.
    this.repository.adoptModel(entry);
    // answers cached before now may come from the files the reload replaced
    await this.client.state.bumpGeneration(name);
    return { model: name, versions: entry.versions, workers };
  }

  /** One model's view from the shared state (the caller flushes this replica's counts first). */
  private async describe(name: string): Promise<ModelAdminView> {
    const entry = this.repository.get(name);
    const [split, stats] = await Promise.all([
      this.client.state.getTraffic(name),
      this.client.stats.stats(name),
    ]);
    const { hits, misses } = stats.cache;
    return {
      name,
      kind: entry.config.kind,
      versions: entry.versions,
      stable_version: entry.defaultVersion,
      traffic: split ?? { [entry.defaultVersion]: 100 },
      stats: Object.fromEntries(
        Object.entries(stats.versions).map(([v, s]) => [
          v,
          { ...s, error_rate: s.requests ? s.errors / s.requests : null },
        ]),
      ),
      cache: { hits, misses, hit_rate: hits + misses > 0 ? hits / (hits + misses) : null },
      fallbacks: stats.fallbacks,
    };
  }
}

/** Redis and the workers as health probes see them. */
export class HealthService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly draining: () => boolean,
  ) {}

  /** This replica can take and queue requests: Redis answers and it is not draining. */
  async ready(): Promise<boolean> {
    return !this.draining() && (await this.client.ping());
  }

  async redisUp(): Promise<boolean> {
    return this.client.ping();
  }

  /** Live workers per queue name ("model.vN"), from the shared heartbeat hash. */
  workersPerQueue(): Promise<Map<string, number>> {
    return this.client.workers.perQueue();
  }

  /**
   * Triton's repository index: every version of every model, READY where a live worker serves
   * it, UNAVAILABLE (and why) where none does.
   */
  async repositoryIndex(): Promise<
    Array<{ name: string; version: string; state: "READY" | "UNAVAILABLE"; reason: string }>
  > {
    const counts = await this.workersPerQueue();
    return this.repository.list().flatMap((entry) =>
      entry.versions.map((version) => {
        const ready = (counts.get(queueName(entry.config.name, version)) ?? 0) > 0;
        return {
          name: entry.config.name,
          version,
          state: ready ? ("READY" as const) : ("UNAVAILABLE" as const),
          reason: ready ? "" : "no live worker serves this version",
        };
      }),
    );
  }

  /** Whether a live worker serves `name` at `version` (the default one when unnamed). */
  async modelReady(name: string, version?: string): Promise<{ version: string; ready: boolean }> {
    const resolved = this.repository.resolve(name, version);
    const counts = await this.workersPerQueue();
    return {
      version: resolved.version,
      ready: (counts.get(queueName(name, resolved.version)) ?? 0) > 0,
    };
  }
}
