/**
 * A Content-Type's media type, lower-cased, its parameters dropped: what a route reads a body
 * as. Every route and middleware asks this, so that no two of them tell a body's kind apart
 * differently ("application/json; x=ndjson" had been streamed as NDJSON by one, past the body
 * limit, and parsed whole as JSON by another).
 */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/** NDJSON's media types (JSON Lines' too): a body of one JSON value a line. */
const NDJSON = new Set(["application/x-ndjson", "application/ndjson", "application/jsonl"]);

export function isNdjson(contentType: string | undefined): boolean {
  return NDJSON.has(mediaType(contentType));
}

/** JSON's media type, and a structured one whose suffix is +json (RFC 6839), as Hono's validators take them. */
export function isJson(contentType: string | undefined): boolean {
  const type = mediaType(contentType);
  return type === "application/json" || /^application\/[a-z0-9.-]+\+json$/.test(type);
}
