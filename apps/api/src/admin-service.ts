import type { ModelRepository } from "@ferry/model-repository";
import { FerryError, queueName, type ReloadOutcome } from "@ferry/protocol";
import type { InferenceClient } from "@ferry/transport";
import type { Logger } from "pino";
import { validateSplit } from "./traffic-router.js";

export interface VersionAdminView {
  requests: number;
  errors: number;
  error_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
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

/** Operators' actions: canary splits, rollback, reloads, and the view of every model. */
export class AdminService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly log: Logger,
  ) {}

  async models(): Promise<ModelAdminView[]> {
    return Promise.all(this.repository.list().map((m) => this.describe(m.config.name)));
  }

  async setTraffic(name: string, split: Record<string, number>): Promise<ModelAdminView> {
    const entry = this.repository.get(name);
    await this.client.state.setTraffic(name, validateSplit(entry, split));
    this.log.info({ model: name, traffic: split }, "traffic split changed");
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
    let next: ModelRepository;
    try {
      next = await this.repository.reread();
    } catch (err) {
      throw new FerryError(
        "INVALID_INPUT",
        `Repository refused: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const entry = next.get(name);
    const expected = (await this.client.workers.live()).length;
    const workers = await this.client.control.requestReload(name, expected);
    const failures = workers.flatMap((w) =>
      w.failed.map((f) => `${w.worker}: version ${f.version}: ${f.error}`),
    );
    this.log.info({ model: name, workers: workers.length, failures: failures.length }, "reload");
    if (failures.length > 0) {
      throw new FerryError(
        "INVALID_INPUT",
        `Reload of '${name}' refused; the previous files keep serving. ${failures.join("; ")}`,
      );
    }
    // Only now does this API route to what the workers accepted: a refused new version is
    // never listed, nor made the default, here.
    this.repository.adopt(next);
    // answers cached before now may come from the files the reload replaced
    await this.client.state.bumpGeneration(name);
    return { model: name, versions: entry.versions, workers };
  }

  private async describe(name: string): Promise<ModelAdminView> {
    const entry = this.repository.get(name);
    const state = this.client.state;
    await state.flush();
    const [split, stats] = await Promise.all([state.getTraffic(name), state.stats(name)]);
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
  async workersPerQueue(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for (const w of await this.client.workers.live()) {
      for (const q of w.queues) counts.set(q, (counts.get(q) ?? 0) + 1);
    }
    return counts;
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
