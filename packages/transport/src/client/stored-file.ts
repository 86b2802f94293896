/** A file as the Files API keeps it. */
export interface StoredFile {
  id: string;
  /** The tenant that uploaded it (or whose batch wrote it). */
  owner: string;
  filename: string;
  purpose: string;
  bytes: number;
  /** Its lines that are not blank. */
  lines: number;
  /** Unix seconds. */
  created_at: number;
  /** Unix seconds: when its keys expire. */
  expires_at: number;
  status: "uploading" | "processed";
  /** The distinct urls a batch input file's lines name. */
  urls: string[];
  /** Its keyed upload's fingerprint, for a retry that takes the key over to compare. */
  fingerprint?: string;
  /** A batch's output or error file whose lines are its kept answers (`finishLinked`). */
  linked?: FileLink;
}

/**
 * Where a batch's output or error file's lines are, when they are not copied into it: the
 * batch's kept answers (`Keys.openAiBatchLines`), chunk by chunk, each its `part`'s block.
 */
export interface FileLink {
  batch: string;
  part: "ok" | "failed";
  /** Chunks of kept answers, fields c0 .. c<chunks - 1>. */
  chunks: number;
  /** The batch's other file linked to the same answers ("" for none). */
  sibling: string;
}

/** A new file's description; the rest is counted as its chunks are appended. */
export type NewFile = Pick<StoredFile, "id" | "owner" | "filename" | "purpose">;

/** HGETALL's flat reply as a record. */
export function pairs(flat: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let k = 0; k + 1 < flat.length; k += 2) record[flat[k] ?? ""] = flat[k + 1] ?? "";
  return record;
}

export function parseFile(raw: Record<string, string>): StoredFile | undefined {
  if (!raw.id) return undefined;
  return {
    id: raw.id,
    owner: raw.owner ?? "",
    filename: raw.filename ?? "",
    purpose: raw.purpose ?? "",
    bytes: Number(raw.bytes ?? 0),
    lines: Number(raw.lines ?? 0),
    created_at: Number(raw.created_at ?? 0),
    expires_at: Number(raw.expires_at ?? 0),
    status: raw.status === "processed" ? "processed" : "uploading",
    urls: JSON.parse(raw.urls ?? "[]") as string[],
    ...(raw.fingerprint ? { fingerprint: raw.fingerprint } : {}),
    ...(raw.linked_batch
      ? {
          linked: {
            batch: raw.linked_batch,
            part: raw.linked_part === "failed" ? ("failed" as const) : ("ok" as const),
            chunks: Number(raw.linked_chunks ?? 0),
            sibling: raw.linked_sibling ?? "",
          },
        }
      : {}),
  };
}
