import type { GenerateJob, JobEventBody } from "@ferry/protocol";
import { genAiOperation } from "@ferry/telemetry";
import type { WorkerMetrics } from "../metrics.js";

/**
 * One completion's moments on this worker, by the wall clock (the API's accept is another
 * process's): picked up, admitted to the continuous batch, first token, end.
 */
export class GenerationClock {
  readonly pickedAt = Date.now();
  admittedAt: number | undefined;
  firstTokenAt: number | undefined;
  /** Tokens drawn here (a job taken over had some drawn by the worker before). */
  tokens = 0;

  /** `resumed`: an earlier attempt drew tokens already, so the first token here is not the first. */
  constructor(
    readonly acceptedAt: number,
    readonly resumed = false,
  ) {}

  admitted(): void {
    this.admittedAt ??= Date.now();
  }

  saw(events: readonly JobEventBody[]): void {
    for (const e of events) {
      if (e.type !== "token") continue;
      this.tokens += e.ids?.length ?? 1;
      this.firstTokenAt ??= Date.now();
    }
  }

  /**
   * It ended well, its first token drawn `ttftMs` after its seat was taken (the result's
   * `ttft_ms`): that is its first token where none was sent (the end of text drawn first, or
   * every token's text held back to the end), so that it still has a TTFT.
   */
  ended(ttftMs: number): void {
    this.firstTokenAt ??= (this.admittedAt ?? this.pickedAt) + ttftMs;
  }

  /** Where its time went (the result's `timing`): queue, waiting for a seat, inference. */
  timing(now = Date.now()): { queue_ms: number; batch_ms: number; infer_ms: number } {
    const admitted = this.admittedAt ?? this.pickedAt;
    return {
      queue_ms: Math.max(0, this.pickedAt - this.acceptedAt),
      batch_ms: Math.max(0, admitted - this.pickedAt),
      infer_ms: Math.max(0, now - admitted),
    };
  }
}

/** OpenTelemetry's GenAI server metrics of one generator version. */
export class GenAiMetrics {
  constructor(
    private readonly metrics: WorkerMetrics,
    private readonly responseModel: string,
  ) {}

  /** A completion's end: its duration, and for one that ended well its TTFT and TPOT here. */
  observe(job: GenerateJob, clock: GenerationClock, error?: unknown): void {
    const now = Date.now();
    const labels = {
      gen_ai_operation_name: genAiOperation(job.meta?.format),
      gen_ai_request_model: job.model,
      gen_ai_response_model: this.responseModel,
    };
    const code = (error as { code?: unknown } | undefined)?.code;
    this.metrics.genAiDuration.observe(
      {
        ...labels,
        error_type: error === undefined ? "" : typeof code === "string" ? code : "INTERNAL",
      },
      Math.max(0, now - clock.acceptedAt) / 1000,
    );
    const first = clock.firstTokenAt;
    if (error !== undefined || first === undefined) return;
    if (!clock.resumed)
      this.metrics.genAiTtft.observe(labels, Math.max(0, first - clock.acceptedAt) / 1000);
    if (clock.tokens > 1)
      this.metrics.genAiTpot.observe(labels, (now - first) / 1000 / (clock.tokens - 1));
  }
}
