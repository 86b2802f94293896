import { join } from "node:path";
import { GrammarEngine } from "@ferry/guided/engine";
import { loadTokenizer } from "@ferry/model-repository";
import type { CompletionResult, GenerateJob, JobEventBody, ModelConfig } from "@ferry/protocol";
import {
  type ExecutionProvider,
  GraphMismatchError,
  generatorMismatch,
  LmRuntime,
} from "@ferry/runtime";
import type { ExecutionStats, GenerateContext } from "@ferry/transport";
import type { WorkerMetrics } from "../metrics.js";
import { GenerationSpans } from "../tracing/generation-spans.js";
import { Engine } from "./engine.js";
import { GenAiMetrics, GenerationClock } from "./generation-clock.js";
import { generationMetrics } from "./generation-metrics.js";
import { type GeneratorConfig, generatorConfigSchema, lmShape } from "./generator-config.js";
import { Scheduler } from "./scheduler.js";

/** Serves one generator version: tokenizer, KV-cached runtime, scheduler and engine. */
export class GeneratorServer {
  private constructor(
    readonly config: ModelConfig,
    readonly generator: GeneratorConfig,
    private readonly runtime: LmRuntime,
    private readonly engine: Engine,
    private readonly genAi: GenAiMetrics,
    private readonly grammars: GrammarEngine | undefined,
    private readonly version: string,
    private readonly stats?: Pick<ExecutionStats, "completion">,
  ) {}

  static async load(
    config: ModelConfig,
    version: string,
    dir: string,
    executionProvider: ExecutionProvider,
    metrics: WorkerMetrics,
    stats?: Pick<ExecutionStats, "execution" | "row" | "request" | "completion">,
  ): Promise<GeneratorServer> {
    const generator = generatorConfigSchema.parse(config);
    const arch = generator.architecture;
    const tokenizer = await loadTokenizer(dir, generator.tokenizer);
    const prefillThread = generator.scheduler.prefill_thread && !generator.scheduler.mixed_prefill;
    const shape = lmShape(generator);
    const runtime = await LmRuntime.load(
      join(dir, version, "model.onnx"),
      shape,
      { executionProvider, intraOpThreads: config.intra_op_threads },
      {
        prefillThread,
        prefixCacheBytes: generator.scheduler.enable_prefix_caching
          ? generator.scheduler.prefix_cache_mb * 2 ** 20
          : 0,
      },
    );
    const mismatch = generatorMismatch(
      config,
      shape,
      runtime.graph,
      `${config.name}/${version}/model.onnx`,
    );
    if (mismatch) {
      await runtime.close();
      throw new GraphMismatchError(mismatch);
    }
    const scheduler = new Scheduler({
      maxNumSeqs: generator.scheduler.max_num_seqs,
      maxBatchedTokens: generator.scheduler.max_num_batched_tokens,
      policy: generator.scheduler.policy,
      staticWaitMs: generator.scheduler.static_wait_ms,
      batchSeatShare: generator.scheduler.batch_seat_share,
      batchReservedSeats: generator.scheduler.batch_reserved_seats,
    });
    // guided decoding spells text token by token: only a vocabulary of known bytes can be
    // guided. A grammar thread per model version: XGrammar works on one request at a time,
    // and on a thread shared by the worker's models, one model's costly grammars (each within
    // its budget) had kept another model's guided requests waiting for seconds
    const grammars =
      tokenizer.exactTokenBytes && tokenizer.eosTokenId !== undefined
        ? new GrammarEngine()
        : undefined;
    grammars?.vocabulary(tokenizer, arch.vocab_size);
    const engine = new Engine(
      runtime,
      scheduler,
      tokenizer,
      generationMetrics(metrics, config.name, version, stats),
      {
        contextLength: arch.context_length,
        vocabSize: arch.vocab_size,
        mixedPrefill: generator.scheduler.mixed_prefill,
        prefillThread,
        prefixCaching: generator.scheduler.enable_prefix_caching,
        prefixCacheCompletions:
          generator.scheduler.enable_prefix_caching && generator.scheduler.prefix_cache_completions,
      },
      grammars,
    );
    const genAi = new GenAiMetrics(metrics, `${config.name}:${version}`);
    return new GeneratorServer(config, generator, runtime, engine, genAi, grammars, version, stats);
  }

  /** Seats: how many completions one worker runs at once. */
  get maxNumSeqs(): number {
    return this.generator.scheduler.max_num_seqs;
  }

  /** The share of seats offline batches' lines keep while interactive requests wait. */
  get batchSeatShare(): number {
    return this.generator.scheduler.batch_seat_share;
  }

  /**
   * Runs a completion: its result says where its time went, the GenAI metrics observe it,
   * and its spans join its request's trace when it carries one.
   */
  async handle(
    job: GenerateJob,
    ctx: Pick<GenerateContext, "jobId" | "signal" | "emit" | "resume" | "attempt" | "priority">,
  ): Promise<CompletionResult> {
    const resumed = (ctx.resume?.ids.length ?? 0) > 0;
    const clock = new GenerationClock(job.accepted_at, resumed);
    const spans = GenerationSpans.start(job, ctx.jobId, ctx.attempt, resumed);
    const emit = (events: JobEventBody[]) => {
      clock.saw(events);
      spans?.events(events);
      ctx.emit(events);
    };
    const admitted = () => {
      clock.admitted();
      spans?.admitted();
    };
    try {
      const result = await this.engine.submit(job, ctx.signal, emit, {
        resume: ctx.resume,
        onAdmitted: admitted,
        priority: ctx.priority,
      });
      // a token was drawn (the end of text, drawn first, counts in no usage): it has a TTFT
      if (result.usage.completion_tokens > 0 || result.finish_reason === "stop")
        clock.ended(result.ttft_ms);
      spans?.succeeded(result, clock.firstTokenAt);
      this.genAi.observe(job, clock);
      this.count(ctx.jobId, clock, result.usage.completion_tokens);
      return { ...result, timing: clock.timing() };
    } catch (err) {
      spans?.failed(err);
      this.genAi.observe(job, clock, err);
      this.count(ctx.jobId, clock, 0, err);
      throw err;
    }
  }

  /**
   * A completion in its version's recent activity (the dashboard's): its tokens, and where its
   * time went should it be among the slowest. A cancel is the client leaving: not counted.
   */
  private count(id: string, clock: GenerationClock, tokens: number, error?: unknown): void {
    if ((error as { code?: unknown } | undefined)?.code === "CANCELLED") return;
    const now = Date.now();
    const timing = clock.timing(now);
    this.stats?.completion(this.config.name, this.version, {
      id,
      total_ms: Math.max(0, now - clock.acceptedAt),
      failed: error !== undefined,
      queue_ms: timing.queue_ms,
      batch_ms: timing.batch_ms,
      compute_ms: timing.infer_ms,
      ttft_ms:
        clock.firstTokenAt === undefined || clock.resumed
          ? undefined
          : clock.firstTokenAt - clock.acceptedAt,
      tokens,
    });
  }

  /** Lets every sequence it holds finish, then stops the runtime. */
  async close(): Promise<void> {
    await this.engine.whenIdle();
    await Promise.all([this.runtime.close(), this.grammars?.shutdown()]);
  }
}
