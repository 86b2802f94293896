import { join } from "node:path";
import { loadTokenizer, tokenizerConfigSchema } from "@ferry/model-repository";
import type {
  CompletionResult,
  GenerateJob,
  JobEventBody,
  ModelConfig,
  ResumePoint,
} from "@ferry/protocol";
import { type ExecutionProvider, LmRuntime } from "@ferry/runtime";
import type { ExecutionStats } from "@ferry/transport";
import { z } from "zod";
import type { WorkerMetrics } from "../metrics.js";
import { Engine } from "./engine.js";
import { generationMetrics } from "./generation-metrics.js";
import { grammarEngine } from "./grammars.js";
import { Scheduler } from "./scheduler.js";

/** What a generator's model.json must say beyond the common fields. */
const generatorConfigSchema = z.object({
  tokenizer: tokenizerConfigSchema,
  architecture: z.object({
    n_layer: z.number().int().positive(),
    n_head: z.number().int().positive(),
    head_dim: z.number().int().positive(),
    vocab_size: z.number().int().positive(),
    context_length: z.number().int().positive(),
  }),
  scheduler: z
    .object({
      max_num_seqs: z.number().int().positive().default(16),
      max_num_batched_tokens: z.number().int().positive().default(2048),
      mixed_prefill: z.boolean().default(false),
      /**
       * Prompts run on a second thread (and session) while the decode step goes on; ignored
       * with mixed_prefill. Costs one more copy of the weights in memory.
       */
      prefill_thread: z.boolean().default(true),
      policy: z.enum(["continuous", "static"]).default("continuous"),
      static_wait_ms: z.number().nonnegative().default(50),
      /**
       * vLLM's automatic prefix caching: prompts' KV caches are kept (in blocks of 16 tokens),
       * and a prompt that begins as a kept one reads only the rest.
       */
      enable_prefix_caching: z.boolean().default(true),
      /** What each LM thread keeps of them at most, in MiB (least recently used go first). */
      prefix_cache_mb: z.number().positive().default(32),
      /**
       * Finished completions' caches too (prompt and answer): a multi-turn chat whose template
       * renders the answer as it was generated, or a transcript that goes on from it, reads
       * only what is new. Off by default: the copy at every finish costs every completion
       * where nothing is shared (`npm run bench -- prefix`, part b).
       */
      prefix_cache_completions: z.boolean().default(false),
    })
    .default({
      max_num_seqs: 16,
      max_num_batched_tokens: 2048,
      mixed_prefill: false,
      prefill_thread: true,
      policy: "continuous",
      static_wait_ms: 50,
      enable_prefix_caching: true,
      prefix_cache_mb: 32,
      prefix_cache_completions: false,
    }),
});
export type GeneratorConfig = z.infer<typeof generatorConfigSchema>;

/** Serves one generator version: tokenizer, KV-cached runtime, scheduler and engine. */
export class GeneratorServer {
  private constructor(
    readonly config: ModelConfig,
    readonly generator: GeneratorConfig,
    private readonly runtime: LmRuntime,
    private readonly engine: Engine,
  ) {}

  static async load(
    config: ModelConfig,
    version: string,
    dir: string,
    executionProvider: ExecutionProvider,
    metrics: WorkerMetrics,
    stats?: Pick<ExecutionStats, "execution" | "row" | "request">,
  ): Promise<GeneratorServer> {
    const generator = generatorConfigSchema.parse(config);
    const arch = generator.architecture;
    const tokenizer = await loadTokenizer(dir, generator.tokenizer);
    const prefillThread = generator.scheduler.prefill_thread && !generator.scheduler.mixed_prefill;
    const runtime = await LmRuntime.load(
      join(dir, version, "model.onnx"),
      { layers: arch.n_layer, heads: arch.n_head, headDim: arch.head_dim, vocab: arch.vocab_size },
      { executionProvider, intraOpThreads: config.intra_op_threads },
      {
        prefillThread,
        prefixCacheBytes: generator.scheduler.enable_prefix_caching
          ? generator.scheduler.prefix_cache_mb * 2 ** 20
          : 0,
      },
    );
    const scheduler = new Scheduler({
      maxNumSeqs: generator.scheduler.max_num_seqs,
      maxBatchedTokens: generator.scheduler.max_num_batched_tokens,
      policy: generator.scheduler.policy,
      staticWaitMs: generator.scheduler.static_wait_ms,
    });
    // guided decoding spells text token by token: only a vocabulary of known bytes can be guided
    const grammars =
      tokenizer.exactTokenBytes && tokenizer.eosTokenId !== undefined ? grammarEngine() : undefined;
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
    return new GeneratorServer(config, generator, runtime, engine);
  }

  /** Seats: how many completions one worker runs at once. */
  get maxNumSeqs(): number {
    return this.generator.scheduler.max_num_seqs;
  }

  handle(
    job: GenerateJob,
    signal: AbortSignal,
    emit: (events: JobEventBody[]) => void,
    resume?: ResumePoint,
  ): Promise<CompletionResult> {
    return this.engine.submit(job, signal, emit, resume);
  }

  /** Lets every sequence it holds finish, then stops the runtime. */
  async close(): Promise<void> {
    await this.engine.whenIdle();
    await this.runtime.close();
  }
}
