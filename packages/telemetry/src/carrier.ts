import { type Context, context, propagation, ROOT_CONTEXT } from "@opentelemetry/api";

/**
 * W3C trace context as it crosses Redis with a job or a row (`traceparent`, `tracestate`):
 * what lets the worker's spans join the trace of the request that queued the work.
 */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string | undefined;
}

/** The carrier of `ctx` (the active context by default); undefined when nothing is traced. */
export function carrierOf(ctx: Context = context.active()): TraceCarrier | undefined {
  const fields: Record<string, string> = {};
  propagation.inject(ctx, fields);
  const { traceparent, tracestate } = fields;
  if (!traceparent) return undefined;
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/** Contexts read from carriers, by carrier: a row's is read for its batch's link and its own span. */
const read = new WeakMap<TraceCarrier, Context>();

/** The context a carrier names, to start the worker's spans in; the root one without. */
export function contextOf(carrier: TraceCarrier | undefined): Context {
  if (!carrier) return ROOT_CONTEXT;
  const known = read.get(carrier);
  if (known) return known;
  const fields: Record<string, string> = { traceparent: carrier.traceparent };
  if (carrier.tracestate) fields.tracestate = carrier.tracestate;
  const ctx = propagation.extract(ROOT_CONTEXT, fields);
  read.set(carrier, ctx);
  return ctx;
}
