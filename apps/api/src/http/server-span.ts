import {
  type Context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  tracer,
} from "@ferry/telemetry";

/**
 * The API's span of one HTTP request (OpenTelemetry's HTTP server conventions): a child of
 * the caller's `traceparent` when it sends one (its sampling decision honoured), else the root
 * of a new trace. Work the request queues carries the returned context to the worker.
 */
export function startServerSpan(
  method: string,
  path: string,
  header: (name: string) => string | undefined,
): { span: Span; ctx: Context } {
  const traceparent = header("traceparent");
  let parent = ROOT_CONTEXT;
  if (traceparent) {
    const carrier: Record<string, string> = { traceparent };
    const tracestate = header("tracestate");
    if (tracestate) carrier.tracestate = tracestate;
    parent = propagation.extract(ROOT_CONTEXT, carrier);
  }
  const span = tracer().startSpan(
    `${method} ${path}`,
    {
      kind: SpanKind.SERVER,
      attributes: { "http.request.method": method, "url.path": path },
    },
    parent,
  );
  return { span, ctx: trace.setSpan(parent, span) };
}

/** Names the span by its route's template (`POST /v1/models/:name/predict`) and ends it. */
export function endServerSpan(span: Span, method: string, route: string, status: number): void {
  span.updateName(`${method} ${route}`);
  span.setAttribute("http.route", route);
  span.setAttribute("http.response.status_code", status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
