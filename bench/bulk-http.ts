// Large bodies up and down for the offline arms, on node:http without web streams: the bench's
// client shares the machine's two cores with the stack it measures, and `fetch` (undici) spent
// ~0.9 s of CPU a round moving a 40 MB file up and its 40 MB answers down (from /proc), close to
// what the in-process pipeline it is held against spends on the whole batch.
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, statSync } from "node:fs";
import { type IncomingMessage, request } from "node:http";

/** An answer whose body was read whole (a small JSON one). */
export interface BulkAnswer {
  status: number;
  text: string;
}

/** A body part: bytes, or a file on disk streamed as a user's client sends one. */
type Part = Uint8Array | { path: string };

/** Bytes the file parts are read at a time: as the in-process pipeline reads its input. */
const READ_BYTES = 1 << 20;

function partLength(part: Part): number {
  return part instanceof Uint8Array ? part.byteLength : statSync(part.path).size;
}

function send(
  url: string,
  method: string,
  headers: Record<string, string | number>,
  parts: readonly Part[],
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, resolve);
    req.on("error", reject);
    const write = async () => {
      for (const part of parts) {
        if (part instanceof Uint8Array) {
          if (!req.write(part)) await new Promise((r) => req.once("drain", r));
          continue;
        }
        for await (const chunk of createReadStream(part.path, { highWaterMark: READ_BYTES }))
          if (!req.write(chunk as Buffer)) await new Promise((r) => req.once("drain", r));
      }
      req.end();
    };
    write().catch((err: unknown) => {
      req.destroy(err as Error);
      reject(err);
    });
  });
}

async function readWhole(res: IncomingMessage): Promise<BulkAnswer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") };
}

/**
 * POSTs the file at `path` as it is, with `contentType`, read from disk as it is sent (a whole
 * 45 MB file read into memory first took ~155 ms of this VM before the first byte went out).
 */
export async function postBody(
  url: string,
  path: string,
  contentType: string,
): Promise<BulkAnswer> {
  const headers = { "content-type": contentType, "content-length": partLength({ path }) };
  return readWhole(await send(url, "POST", headers, [{ path }]));
}

/**
 * POSTs a multipart/form-data form of text `fields` and the file at `path`, as `files.create`
 * sends one given `fs.createReadStream(path)`: read from disk as it is sent.
 */
export async function postFile(
  url: string,
  fields: Record<string, string>,
  path: string,
  filename: string,
): Promise<BulkAnswer> {
  const boundary = `----ferry-bench-${randomBytes(8).toString("hex")}`;
  let head = "";
  for (const [name, value] of Object.entries(fields))
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const parts: Part[] = [Buffer.from(head), { path }, Buffer.from(`\r\n--${boundary}--\r\n`)];
  const headers = {
    "content-type": `multipart/form-data; boundary=${boundary}`,
    "content-length": parts.reduce((n, p) => n + partLength(p), 0),
  };
  return readWhole(await send(url, "POST", headers, parts));
}

/** GETs `url` into the file at `path`; the lines the body held. Throws on a status not 200. */
export async function getToFile(url: string, path: string): Promise<number> {
  const res = await send(url, "GET", {}, []);
  if (res.statusCode !== 200) {
    const { status, text } = await readWhole(res);
    throw new Error(`${url}: ${status} ${text}`);
  }
  const out = createWriteStream(path);
  let lines = 0;
  for await (const chunk of res) {
    const bytes = chunk as Buffer;
    for (let at = bytes.indexOf(0x0a); at >= 0; at = bytes.indexOf(0x0a, at + 1)) lines++;
    if (!out.write(bytes)) await new Promise<void>((r) => out.once("drain", () => r()));
  }
  out.end();
  await new Promise<void>((r) => out.once("close", () => r()));
  return lines;
}
