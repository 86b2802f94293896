import { tokenizerConfigSchema } from "@ferry/model-repository";
import type { LmShape } from "@ferry/runtime";
import { z } from "zod";

/** What a generator's model.json must say beyond the common fields. */
export const generatorConfigSchema = z.object({
  tokenizer: tokenizerConfigSchema,
  architecture: z
    .object({
      n_layer: z.number().int().positive(),
      n_head: z.number().int().positive(),
      /**
       * Heads of the KV cache, fewer than n_head under grouped-query attention (Llama 3,
       * Qwen, Mistral: config.json's num_key_value_heads); n_head when left out.
       */
      n_kv_head: z.number().int().positive().optional(),
      head_dim: z.number().int().positive(),
      vocab_size: z.number().int().positive(),
      context_length: z.number().int().positive(),
    })
    .refine((a) => a.n_kv_head === undefined || a.n_head % a.n_kv_head === 0, {
      message: "n_kv_head must divide n_head: each KV head serves a group of query heads",
      path: ["n_kv_head"],
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
      /**
       * The share of max_num_seqs (0 to 1) offline batches' lines (priority 1-3) may hold
       * while interactive requests wait; past it the latest admitted give their seats up
       * (recomputed when they rejoin). With nothing else waiting they take every seat.
       */
      batch_seat_share: z.number().min(0).max(1).default(0.5),
      /**
       * Seats offline batches' lines never take, even with nothing else waiting (at most
       * max_num_seqs - 1): an interactive request arriving mid-step is seated and its prompt
       * started at once, not after the step that preempts a line for it.
       */
      batch_reserved_seats: z.number().int().nonnegative().default(1),
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
      batch_seat_share: 0.5,
      batch_reserved_seats: 1,
    }),
});
export type GeneratorConfig = z.infer<typeof generatorConfigSchema>;

/** The KV cache the LM thread keeps, as `architecture` describes it. */
export function lmShape({ architecture: a }: GeneratorConfig): LmShape {
  return {
    layers: a.n_layer,
    kvHeads: a.n_kv_head ?? a.n_head,
    headDim: a.head_dim,
    vocab: a.vocab_size,
  };
}
