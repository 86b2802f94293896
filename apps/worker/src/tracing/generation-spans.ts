import type { CompletionResult, GenerateJob, JobEventBody } from "@ferry/protocol";
import {
  type Context,
  contextOf,
  GEN_AI,
  genAiOperation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  tracer,
} from "@ferry/telemetry";

/**
 * One completion's spans in its request's trace (vLLM's `llm_request`, TGI's backend spans),
 * named and described by OpenTelemetry's GenAI conventions: `{operation} {model}` from the
 * API's accept to the last token, with `waiting` (Redis' queue and the scheduler's), `prefill`
 * (to the first token) and `decode` (the rest, with its token count) inside; time to first
 * token and per output token as attributes. A job taken over after its worker died makes
 * the same spans again, marked with its attempt. No prompt or output text.
 */
export class GenerationSpans {
  private readonly root: Span;
  private readonly ctx: Context;
  private readonly waiting: Span;
  private prefill: Span | undefined;
  private decode: Span | undefined;
  private firstTokenAt: number | undefined;
  private tokens = 0;

  private constructor(
    private readonly job: GenerateJob,
    jobId: string,
    attempt: number,
    /** Whether an earlier attempt drew tokens already: this one's first is not the first. */
    private readonly resumed: boolean,
  ) {
    const operation = genAiOperation(job.meta?.format);
    const p = job.params;
    this.root = tracer().startSpan(
      `${operation} ${job.model}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: job.accepted_at,
        attributes: {
          [GEN_AI.operationName]: operation,
          [GEN_AI.requestModel]: job.model,
          [GEN_AI.responseModel]: `${job.model}:${job.version}`,
          [GEN_AI.responseId]: jobId,
          ...(p.max_tokens === undefined ? {} : { [GEN_AI.requestMaxTokens]: p.max_tokens }),
          ...(p.temperature === undefined ? {} : { [GEN_AI.requestTemperature]: p.temperature }),
          ...(p.top_p === undefined ? {} : { [GEN_AI.requestTopP]: p.top_p }),
          ...(p.seed === undefined ? {} : { [GEN_AI.requestSeed]: p.seed }),
          "ferry.job.attempt": attempt,
        },
      },
      contextOf(job.trace),
    );
    this.ctx = trace.setSpan(contextOf(job.trace), this.root);
    this.waiting = this.child("waiting", job.accepted_at);
  }

  /** Spans for `job`, or undefined when it carries no trace. */
  static start(
    job: GenerateJob,
    jobId: string,
    attempt: number,
    resumed = false,
  ): GenerationSpans | undefined {
    return job.trace ? new GenerationSpans(job, jobId, attempt, resumed) : undefined;
  }

  private child(name: string, start: number): Span {
    return tracer().startSpan(name, { kind: SpanKind.INTERNAL, startTime: start }, this.ctx);
  }

  /** Its prefill begins (the scheduler admitted it). */
  admitted(): void {
    const now = Date.now();
    if (this.waiting.isRecording()) this.waiting.end(now);
    this.prefill ??= this.child("prefill", now);
  }

  /** Sees the events it emits: the first token ends the prefill. */
  events(events: readonly JobEventBody[]): void {
    for (const e of events) {
      if (e.type !== "token") continue;
      this.tokens += e.ids?.length ?? 1;
      if (this.firstTokenAt !== undefined) continue;
      const now = Date.now();
      this.firstTokenAt = now;
      if (!this.prefill) this.admitted();
      this.prefill?.end(now);
      this.decode = this.child("decode", now);
    }
  }

  /**
   * `drawnAt`: when its first token was drawn, where none was sent (the end of text drawn
   * first, or all its text held back to the end): its prefill ends there.
   */
  succeeded(result: CompletionResult, drawnAt?: number): void {
    const now = Date.now();
    if (this.firstTokenAt === undefined && drawnAt !== undefined) {
      this.firstTokenAt = drawnAt;
      this.prefill?.end(drawnAt);
    }
    const first = this.firstTokenAt;
    const out = result.usage.completion_tokens;
    // the tokens drawn here: a job taken over from a worker that died had drawn some before,
    // in time this attempt did not measure
    const here = this.tokens;
    this.decode?.setAttribute("ferry.gen_ai.decode.tokens", Math.max(0, here - 1));
    this.root.setAttributes({
      [GEN_AI.responseFinishReasons]: [result.finish_reason],
      [GEN_AI.usageInputTokens]: result.usage.prompt_tokens,
      [GEN_AI.usageOutputTokens]: out,
      ...(first === undefined
        ? {}
        : {
            // the completion's first token came from a worker before this one
            ...(this.resumed
              ? {}
              : { [GEN_AI.timeToFirstTokenS]: (first - this.job.accepted_at) / 1000 }),
            ...(here > 1
              ? { [GEN_AI.timePerOutputTokenS]: (now - first) / 1000 / (here - 1) }
              : {}),
          }),
    });
    this.end(now);
  }

  failed(err: unknown): void {
    const code = (err as { code?: unknown }).code;
    this.root.setAttribute("error.type", typeof code === "string" ? code : "INTERNAL");
    this.root.setStatus({ code: SpanStatusCode.ERROR, message: String((err as Error).message) });
    this.end(Date.now());
  }

  private end(now: number): void {
    for (const span of [this.waiting, this.prefill, this.decode, this.root])
      if (span?.isRecording()) span.end(now);
  }
}
