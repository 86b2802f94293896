import {
  type Context,
  type ContextManager,
  DiagLogLevel,
  diag,
  ROOT_CONTEXT,
} from "@opentelemetry/api";
import { NodeSDK } from "@opentelemetry/sdk-node";
import { tracesSampler } from "./sampler.js";

/** A context manager that keeps none: every span of Ferry's is given its parent outright. */
class ExplicitContextOnly implements ContextManager {
  active(): Context {
    return ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    _context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return fn.call(thisArg, ...args);
  }
  bind<T>(_context: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

/** What a process's tracing needs at exit: spans still buffered are sent. */
export interface Tracing {
  /** True when spans are recorded and exported (an OTLP endpoint is configured). */
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

const OFF: Tracing = { enabled: false, shutdown: async () => {} };

/**
 * Whether the standard variables ask for traces: an OTLP endpoint (all signals or traces
 * alone), or an exporter named outright; OTEL_SDK_DISABLED=true wins. Unset, Ferry runs
 * with OpenTelemetry's no-op API: no span is made, nothing crosses the queue.
 */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === "none") return false;
  return Boolean(
    env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || exporter,
  );
}

/** Where OpenTelemetry's own warnings go: the process's log. */
export interface TracingLog {
  warn(message: string): void;
}

/** How often one of OpenTelemetry's warnings is said again (an export failing every batch). */
const REPEAT_MS = 60_000;
/** Most of OpenTelemetry's warnings said in a minute, whatever they say. */
const LINES_A_MINUTE = 10;

/** An exception's message where the SDK's error handler wrote the whole of it as JSON. */
function readable(message: string): string {
  if (!message.startsWith("{")) return message;
  try {
    const error = JSON.parse(message) as { message?: unknown };
    return typeof error.message === "string" ? error.message : message;
  } catch {
    return message;
  }
}

/**
 * OpenTelemetry's diagnostics at WARN into `log`, each message at most once a minute (with
 * how many times it came meanwhile): an endpoint that refuses every export, or a variable the
 * SDK cannot read, was otherwise silent. OTEL_LOG_LEVEL, when set, keeps the SDK's console.
 */
function sayDiagnostics(log: TracingLog, env: NodeJS.ProcessEnv): void {
  if (env.OTEL_LOG_LEVEL) return;
  const said = new Map<string, { at: number; since: number }>();
  // and at most LINES_A_MINUTE in all: messages that differ each time (an id, a reason phrase)
  // are not one message
  let minute = { from: 0, lines: 0, dropped: 0 };
  const say = (message: string, args: unknown[]) => {
    const text = [
      readable(message),
      ...args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))),
    ]
      .join(" ")
      .slice(0, 1_000);
    const key = text.slice(0, 80);
    const now = Date.now();
    const last = said.get(key);
    if (last && now - last.at < REPEAT_MS) {
      last.since++;
      return;
    }
    if (now - minute.from >= REPEAT_MS) {
      if (minute.dropped > 0)
        log.warn(`OpenTelemetry: ${minute.dropped} more warnings in the last minute, not shown`);
      minute = { from: now, lines: 0, dropped: 0 };
    }
    if (minute.lines >= LINES_A_MINUTE) {
      minute.dropped++;
      return;
    }
    minute.lines++;
    if (said.size >= 100) said.clear();
    said.set(key, { at: now, since: 0 });
    log.warn(
      `OpenTelemetry: ${text}${last?.since ? ` (${last.since} more in the last minute)` : ""}`,
    );
  };
  const quiet = () => {};
  diag.setLogger(
    {
      error: (m, ...a) => say(m, a),
      warn: (m, ...a) => say(m, a),
      info: quiet,
      debug: quiet,
      verbose: quiet,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

/**
 * Starts OpenTelemetry's Node SDK for traces, configured only by the standard variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or http/json,
 * OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER[_ARG], OTEL_SDK_DISABLED): W3C trace context,
 * parent-based sampling (a batch's span by the requests it links), batched export; its
 * warnings in `log`. `service` names the process when OTEL_SERVICE_NAME does not. No
 * automatic instrumentation: Ferry makes its own spans where its work is.
 */
export function startTracing(
  service: string,
  log: TracingLog,
  env: NodeJS.ProcessEnv = process.env,
): Tracing {
  if (!tracingConfigured(env)) return OFF;
  sayDiagnostics(log, env);
  // Ferry's metrics are Prometheus' (/metrics) and its logs pino's: the SDK sends traces only,
  // unless the variables ask for more
  env.OTEL_METRICS_EXPORTER ??= "none";
  env.OTEL_LOGS_EXPORTER ??= "none";
  env.OTEL_SERVICE_NAME ??= service;
  // No context manager: Ferry hands each span's context down itself (a request's in its call
  // options, a job's in its data). The default, AsyncLocalStorage, turns on promise hooks on
  // Node 20, which cost the API a third of its throughput (`npm run bench -- tracing`).
  const sdk = new NodeSDK({
    instrumentations: [],
    contextManager: new ExplicitContextOnly(),
    sampler: tracesSampler(env, (message) => log.warn(message)),
  });
  sdk.start();
  return {
    enabled: true,
    shutdown: () => sdk.shutdown().catch(() => undefined),
  };
}
