// Large bodies up and down for the offline arms, on node:http without web streams: the bench's
// client shares the machine's two cores with the stack it measures, and `fetch` (undici) spent
// ~0.9 s of CPU a round moving a 40 MB file up and its 40 MB answers down (from /proc), close to
// what the in-process pipeline it is held against spends on the whole batch.
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { type IncomingMessage, request } from "node:http";

/** An answer whose body was read whole (a small JSON one). */
export interface BulkAnswer {
  status: number;
  text: string;
}

function send(
  url: string,
  method: string,
  headers: Record<string, string | number>,
  parts: readonly Uint8Array[],
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, resolve);
    req.on("error", reject);
    for (const part of parts) req.write(part);
    req.end();
  });
}

async function readWhole(res: IncomingMessage): Promise<BulkAnswer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") };
}

/** POSTs `body` as it is, with `contentType`. */
export async function postBody(
  url: string,
  body: Uint8Array,
  contentType: string,
): Promise<BulkAnswer> {
  const headers = { "content-type": contentType, "content-length": body.byteLength };
  return readWhole(await send(url, "POST", headers, [body]));
}

/** POSTs a multipart/form-data form of text `fields` and one file, as `files.create` sends it. */
export async function postFile(
  url: string,
  fields: Record<string, string>,
  file: Uint8Array,
  filename: string,
): Promise<BulkAnswer> {
  const boundary = `----ferry-bench-${randomBytes(8).toString("hex")}`;
  let head = "";
  for (const [name, value] of Object.entries(fields))
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const parts = [Buffer.from(head), file, Buffer.from(`\r\n--${boundary}--\r\n`)];
  const headers = {
    "content-type": `multipart/form-data; boundary=${boundary}`,
    "content-length": parts.reduce((n, p) => n + p.byteLength, 0),
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
