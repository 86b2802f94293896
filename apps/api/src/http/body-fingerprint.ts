import { createHash } from "node:crypto";

/**
 * The fingerprint of a request whose `head` is its method, path and query and whose body is
 * `body` as parsed (JSON with its keys sorted): what an Idempotency-Key's retry is compared
 * by. Pure, so that a body parsed on the API's parse thread is fingerprinted there.
 */
export function bodyFingerprint(head: string, body: unknown): string {
  const hash = createHash("sha256").update(head);
  // pieces gathered into large updates: one update a piece was ~8 million calls for an
  // 8 MB array of numbers (1.6 s of the API's loop)
  let pending = "";
  canonicalJson(body, (piece) => {
    pending += piece;
    if (pending.length >= HASH_PIECE_CHARS) {
      hash.update(pending);
      pending = "";
    }
  });
  return hash.update(pending).digest("base64url");
}

/** Characters of canonical JSON gathered before they are hashed. */
const HASH_PIECE_CHARS = 64 * 1024;

/** Whether every element of `list` is written by JSON.stringify as canonical JSON already. */
function allPrimitive(list: readonly unknown[]): boolean {
  for (const item of list) if (item !== null && typeof item === "object") return false;
  return true;
}

/**
 * Writes `value` as JSON with every object's keys sorted, piece by piece, without recursion:
 * a body may nest as deep as its parser allowed (100,000 levels), past any call stack.
 */
function canonicalJson(value: unknown, write: (piece: string) => void): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item instanceof Literal) {
      write(item.text);
      continue;
    }
    if (Array.isArray(item) && allPrimitive(item)) {
      // no object in it, so no key to sort: written whole, as JSON.stringify writes it
      write(JSON.stringify(item));
    } else if (Array.isArray(item)) {
      write("[");
      stack.push(new Literal("]"));
      for (let i = item.length - 1; i >= 0; i--) {
        stack.push(item[i]);
        if (i > 0) stack.push(new Literal(","));
      }
    } else if (item !== null && typeof item === "object") {
      const entries = Object.entries(item as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
      write("{");
      stack.push(new Literal("}"));
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, v] = entries[i] as [string, unknown];
        stack.push(v);
        stack.push(new Literal(`${i > 0 ? "," : ""}${JSON.stringify(k)}:`));
      }
    } else write(JSON.stringify(item) ?? "null");
  }
}

/** Text `canonicalJson` writes as it is (a bracket, a separator, a key). */
class Literal {
  constructor(readonly text: string) {}
}
