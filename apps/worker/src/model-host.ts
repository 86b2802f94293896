import { stat } from "node:fs/promises";
import { join } from "node:path";
import { type ModelEntry, ModelRepository } from "@ferry/model-repository";
import {
  type ModelConfig,
  queueName,
  type ReloadOutcome as WorkerReloadOutcome,
} from "@ferry/protocol";
import { type ExecutionProvider, GraphMismatchError } from "@ferry/runtime";
import type { WorkerTransport } from "@ferry/transport";
import type { Logger } from "pino";
import { ClassifierServer } from "./classifier/classifier-server.js";
import { EmbedderServer } from "./embedder/embedder-server.js";
import { GeneratorServer } from "./generation/generator-server.js";
import type { WorkerMetrics } from "./metrics.js";
import { crashOnTestMarker } from "./test-crash.js";

/** What serves a version's rows (a classifier's or an embedder's) or its completions. */
type Server = ClassifierServer | EmbedderServer | GeneratorServer;

interface Served {
  server: Server;
  /** What was loaded, to tell whether a reload has anything new to load. */
  fingerprint: string;
}

export interface HostOptions {
  repositoryRoot: string;
  /** Models to serve; empty serves every model. */
  models: string[];
  executionProvider: ExecutionProvider;
  lockDurationMs: number;
  stalledIntervalMs: number;
  /**
   * Told whenever a queue starts being served (a model loaded at the start, or a reload's new
   * version): the worker advertises it at once, rather than at its next heartbeat. A reload
   * answers once it has.
   */
  onServing?: () => Promise<void>;
}

/** A version loaded by a reload, not yet serving. */
type Fresh = { version: string; queue: string } & Served;

/**
 * How long a prepared reload waits for its decision: past the API's wait for every answer
 * (60 s). A decision lost is made up by the generation the API bumps on commit.
 */
const HOLD_MS = 120_000;

/** What a reload did here: the control channel's answer, less the worker's name. */
export type ReloadOutcome = Omit<WorkerReloadOutcome, "worker">;

/**
 * The model versions one worker serves, each behind its queue. A reload loads new or changed
 * versions beside the old ones and, once every worker loaded them (the API decides), swaps
 * them in; the old one finishes the rows it holds, then closes. A version whose file does
 * not load refuses the whole reload, and every version keeps its previous files.
 */
export class ModelHost {
  private readonly served = new Map<string, Served>();
  /** Opened by `start`; reloads wait for it (`serially`). */
  private repository!: ModelRepository;
  private reloading: Promise<unknown> = Promise.resolve();
  private stopping = false;
  /** The latest `onServing`: a reload that swapped something in answers after it. */
  private advertised: Promise<void> = Promise.resolve();
  /** What `prepare` loaded, by reload id, until its decision. */
  private readonly held = new Map<
    string,
    { entry: ModelEntry; fresh: Fresh[]; timer: NodeJS.Timeout }
  >();

  constructor(
    private readonly transport: WorkerTransport,
    private readonly metrics: WorkerMetrics,
    private readonly log: Logger,
    private readonly options: HostOptions,
  ) {}

  /**
   * Loads and serves every wanted model, each as soon as it has loaded; a model that does not
   * load stops the start. One whose model.json does not match its graph is left unserved
   * instead (its line logged): the repository is the operator's to fix, and a reload of the
   * model once it is fixed serves it. Reloads wait for the start (they run one at a time with
   * its loads).
   */
  start(): Promise<void> {
    return this.serially(async () => {
      const repository = await ModelRepository.open(this.options.repositoryRoot);
      this.repository = repository;
      for (const name of this.options.models) repository.get(name); // a typo fails at start
      for (const listed of repository.list()) {
        if (this.stopping) return;
        const name = listed.config.name;
        if (!this.wants(name)) continue;
        // its files read after its reload generation: a reload committed in between (this
        // worker not listening) is then made up once it listens again, not taken as seen
        await this.transport.loading(name);
        const entry = await repository.rereadModel(name);
        repository.adoptModel(entry);
        const { outcome, fresh, mismatched } = await this.loadChanged(entry);
        const first = outcome.failed[0];
        if (first && !mismatched)
          throw new Error(`${entry.config.name} v${first.version}: ${first.error}`);
        if (first) continue;
        // loaded after the drain began: it would only take jobs for the drain to wait on
        if (this.stopping) {
          await Promise.allSettled(fresh.map((f) => f.server.close()));
          return;
        }
        this.swap(entry, fresh);
      }
    });
  }

  /**
   * A drain that begins while the start still loads: nothing loaded from then on serves, so
   * that the drain (once the start is over) finishes only what the served models took.
   */
  stopLoading(): void {
    this.stopping = true;
  }

  /**
   * Re-reads the model from the repository and swaps in what changed. Only this model's files
   * are read: another model's, mid-edit on disk, are not this reload's business.
   */
  reload(model: string): Promise<ReloadOutcome> {
    return this.serially(async () => {
      const outcome = await this.loadModel(model, undefined);
      await this.advertised;
      return outcome;
    });
  }

  /**
   * As `reload`, but what loaded is held under `id`, serving nothing, until `decide`: the API
   * swaps it in only once every worker loaded it. Held too long (the decision lost), dropped.
   */
  prepare(model: string, id: string): Promise<ReloadOutcome> {
    return this.serially(() => this.loadModel(model, id));
  }

  /** Swaps in (`commit`) or closes what `prepare` holds under `id`; false if it holds none. */
  decide(id: string, commit: boolean): Promise<boolean> {
    return this.serially(async () => {
      const held = this.held.get(id);
      if (!held) return false;
      this.held.delete(id);
      clearTimeout(held.timer);
      if (commit) {
        this.swap(held.entry, held.fresh);
        // its new queues are listed before the API hears it swapped
        await this.advertised;
      } else await Promise.allSettled(held.fresh.map((f) => f.server.close()));
      return true;
    });
  }

  /**
   * One reload at a time: two loads of one version side by side would both swap, and the
   * first one's new session would never be closed.
   */
  private serially<T>(work: () => Promise<T>): Promise<T> {
    const done = this.reloading.then(work);
    this.reloading = done.catch(() => undefined);
    return done;
  }

  private async loadModel(model: string, holdAs: string | undefined): Promise<ReloadOutcome> {
    if (!this.wants(model)) return { model, loaded: [], unchanged: [], failed: [] };
    const entry = await this.repository.rereadModel(model);
    this.repository.adoptModel(entry);
    const { outcome, fresh } = await this.loadChanged(entry);
    if (outcome.failed.length > 0) return outcome;
    if (holdAs === undefined) {
      this.swap(entry, fresh);
      return outcome;
    }
    const timer = setTimeout(() => void this.decide(holdAs, false), HOLD_MS);
    timer.unref();
    this.held.set(holdAs, { entry, fresh, timer });
    return { ...outcome, held: true };
  }

  get servedQueues(): string[] {
    return [...this.served.keys()];
  }

  async close(): Promise<void> {
    const held = [...this.held.values()].flatMap((h) => h.fresh);
    for (const h of this.held.values()) clearTimeout(h.timer);
    this.held.clear();
    await Promise.allSettled([...this.served.values(), ...held].map((s) => s.server.close()));
  }

  private wants(model: string): boolean {
    return this.options.models.length === 0 || this.options.models.includes(model);
  }

  /**
   * Loads what changed of `entry`'s versions, all or nothing: when one version fails, the
   * others that loaded are closed and none is returned. Swapping those would serve new
   * weights under the old generation, beside cached answers of the old ones, while the API
   * refuses the reload and keeps its view.
   */
  private async loadChanged(
    entry: ModelEntry,
  ): Promise<{ outcome: ReloadOutcome; fresh: Fresh[]; mismatched: boolean }> {
    const model = entry.config.name;
    const outcome: ReloadOutcome = { model, loaded: [], unchanged: [], failed: [] };
    const fresh: Fresh[] = [];
    /** Whether every version that failed was refused for not matching its graph. */
    let mismatched = true;
    for (const version of entry.versions) {
      const queue = queueName(model, version);
      const path = join(entry.dir, version, "model.onnx");
      const fingerprint = await fingerprintOf(entry.config, path);
      if (this.served.get(queue)?.fingerprint === fingerprint) {
        outcome.unchanged.push(version);
        continue;
      }
      try {
        fresh.push({ version, queue, fingerprint, server: await this.open(entry, version, path) });
        outcome.loaded.push(version);
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        outcome.failed.push({ version, error });
        if (err instanceof GraphMismatchError) {
          // the line itself is the message: it names the field and the graph's tensor
          this.log.error({ model, version }, error);
          continue;
        }
        mismatched = false;
        this.log.error(
          { model, version, error },
          "model version failed to load; the model's previous files keep serving",
        );
      }
    }
    if (outcome.failed.length === 0) return { outcome, fresh, mismatched: false };
    await Promise.allSettled(fresh.map((f) => f.server.close()));
    return { outcome: { ...outcome, loaded: [] }, fresh: [], mismatched };
  }

  private swap(entry: ModelEntry, fresh: Fresh[]): void {
    for (const { version, queue, fingerprint, server } of fresh) {
      const current = this.served.get(queue);
      this.served.set(queue, { server, fingerprint });
      if (current)
        void current.server.close(); // finishes what it holds first
      else this.consume(queue, entry.config);
      this.log.info(
        { model: entry.config.name, version, swapped: current !== undefined },
        "serving",
      );
    }
    if (fresh.length > 0) this.advertised = this.options.onServing?.() ?? Promise.resolve();
  }

  private open(entry: ModelEntry, version: string, path: string): Promise<Server> {
    const { config, dir } = entry;
    const { executionProvider } = this.options;
    if (config.kind === "embedder")
      return EmbedderServer.load(
        config,
        version,
        dir,
        executionProvider,
        this.metrics,
        this.transport.stats,
      );
    return config.kind === "generator"
      ? GeneratorServer.load(
          config,
          version,
          dir,
          executionProvider,
          this.metrics,
          this.transport.stats,
        )
      : ClassifierServer.load(
          config,
          version,
          path,
          executionProvider,
          this.metrics,
          this.transport.stats,
        );
  }

  /** Starts the queue's consumer; it looks the server up per job, so a swap needs no restart. */
  private consume(queue: string, config: ModelConfig): void {
    const lock = {
      lockDurationMs: this.options.lockDurationMs,
      stalledIntervalMs: this.options.stalledIntervalMs,
    };
    const current = () => this.served.get(queue)?.server;
    if (config.kind === "generator") {
      const server = current() as GeneratorServer;
      const seats = server.maxNumSeqs;
      // One job per seat: a completion waits in BullMQ, not here, so any worker with a free
      // seat can take it; past them, interactive ones for the seats batch lines give up.
      const interactiveReserve = seats - Math.floor(server.batchSeatShare * seats);
      const options = { concurrency: seats, interactiveReserve, ...lock };
      this.transport.consumeGenerate(queue, options, (job, ctx) => {
        crashOnTestMarker(job.prompt);
        return (current() as GeneratorServer).handle(job, ctx);
      });
      return;
    }
    // Enough jobs in flight to fill every instance's batch while the previous one computes.
    const concurrency = config.max_batch_size * config.instance_count * 2;
    this.transport.consume(
      queue,
      { concurrency, ...lock },
      (row, job, ctx) =>
        (current() as ClassifierServer | EmbedderServer).handle(row, ctx, job.accepted_at),
      config.kind === "classifier"
        ? (rows) => (current() as ClassifierServer).runPacked(rows)
        : undefined,
    );
  }
}

/** Config and file identity of a version: a reload with neither changed loads nothing. */
async function fingerprintOf(config: ModelConfig, onnxPath: string): Promise<string> {
  const s = await stat(onnxPath);
  return `${s.size}:${s.mtimeMs}:${JSON.stringify(config)}`;
}
