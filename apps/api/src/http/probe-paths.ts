/**
 * The probes, the health summary and the metrics: what the probe port answers (read-only),
 * and what is never traced (a probe or a scrape every few seconds is no request to follow).
 */
export const PROBE_PATHS: ReadonlySet<string> = new Set([
  "/v2/health/live",
  "/v2/health/ready",
  "/health",
  "/metrics",
]);
