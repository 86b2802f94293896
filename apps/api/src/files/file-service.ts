import { randomUUID } from "node:crypto";
import { FerryError } from "@ferry/protocol";
import {
  type InferenceClient,
  type ListPage,
  type StorageLimits,
  type StoredFile,
  WriterFencedError,
} from "@ferry/transport";
import { characters } from "../http/characters.js";
import { idempotencyKeyReused } from "../http/errors.js";
import type { MultipartEvent } from "../http/multipart.js";
import { canSee, type Tenant } from "../http/tenant.js";
import { type CheckLines, InputFileUpload, type UploadLimits } from "./input-file-upload.js";

/** A file as OpenAI's Files API shows it. */
export function fileObject(file: StoredFile) {
  return {
    id: file.id,
    object: "file" as const,
    bytes: file.bytes,
    created_at: file.created_at,
    expires_at: file.expires_at,
    filename: file.filename,
    purpose: file.purpose,
    status: "processed" as const,
    status_details: null,
  };
}
export type FileObject = ReturnType<typeof fileObject>;

/** The purposes a file is uploaded with: Ferry keeps files for its Batch API only. */
const UPLOAD_PURPOSES = ["batch"];
/**
 * What an upload of unknown length reserves against its tenant's quota at first, and then as
 * it grows (doubling): a round trip per doubling, not per chunk.
 */
const RESERVE_STEP_BYTES = 8 * 1024 * 1024;
/** How long an upload's reservation lasts unless the upload renews it (a third at a time), in s. */
const RESERVATION_LEASE_S = 300;
/**
 * Characters of a file's name, as most file systems allow: it is kept and listed with the
 * file (a list of 10,000 files with names of the 16 KB a part's headers may hold was 162 MB).
 */
const MAX_FILENAME_CHARS = 255;
/** Bytes of a form field beside the file (`purpose`, `expires_after[...]`). */
const MAX_FIELD_BYTES = 1024;

/**
 * OpenAI's Files API, for batch input files: an upload is checked line by line and stored as
 * it streams in; a file belongs to the tenant that uploaded it (or whose batch wrote it), and
 * another tenant's reads as unknown.
 */
export class FileService {
  constructor(
    private readonly client: InferenceClient,
    private readonly limits: UploadLimits,
    /** What one tenant's uploads may hold at once (FILE_STORAGE_PER_KEY_BYTES, FILES_PER_KEY). */
    private readonly quota: StorageLimits,
    /** Checks a chunk of an input file's lines (the API's parse thread). */
    private readonly check?: CheckLines,
  ) {}

  /**
   * Stores the file a multipart upload carries (fields `file` and `purpose`, in either
   * order). `createdId` names it for a keyed request; `takeover`: an earlier attempt with that
   * key went quiet, and the file it stored whole is the answer. `declaredBytes`: the body's
   * length, when it says it: what the file may take at most. That much is reserved against
   * the tenant's quota before a byte of it is stored (without it, a step at a time as it
   * grows), and settled at its size once whole. `fingerprint`: a keyed upload's, once its
   * events are read to their end: kept with the file, for a takeover to compare.
   */
  async upload(
    events: AsyncIterable<MultipartEvent>,
    tenant: Tenant,
    createdId: string | undefined,
    takeover: boolean,
    declaredBytes?: number,
    fingerprint?: () => string,
  ): Promise<FileObject> {
    const id = `file-${(createdId ?? randomUUID()).replaceAll("-", "")}`;
    if (takeover) {
      const earlier = await this.client.files.get(id);
      if (earlier?.status === "processed") {
        // read to its end all the same: its fingerprint is kept for later retries to compare
        for await (const _event of events);
        // the earlier attempt claimed the key before its body was read (its fingerprint not
        // known then): the file it stored says what it was, and another payload is not it
        const mine = fingerprint?.();
        if (earlier.fingerprint !== undefined && mine !== undefined && mine !== earlier.fingerprint)
          throw idempotencyKeyReused();
        return fileObject(earlier);
      }
    }
    // this attempt's own number on the file, its start: a retry that takes the key over
    // starts later (past the key's stale time) and begins the file again under its own, and an
    // earlier attempt still running (stalled, not dead) then begins, writes, finishes and
    // discards nothing of it (FileStore orders numbered writers)
    const writer = String(Date.now());
    // this attempt's reservation, its own: a retry that took the key over holds its own, and
    // this one failing lets go of this one's only. It is a lease this upload renews while it
    // runs: an API that dies mid-upload leaves it a few minutes, not the file's day
    const reservation = `${id}@${writer}`;
    const leaseEnd = () => Math.floor(Date.now() / 1000) + RESERVATION_LEASE_S;
    /** Bytes reserved (0: none), and the file's bytes received so far. */
    let reserved = 0;
    let received = 0;
    /** Reserves `bytes` (what is left of the quota, if that is less but at least `least`). */
    const reserve = async (bytes: number, least: number) => {
      if (tenant.admin) return;
      reserved = await this.client.storage.reserve(
        tenant.id,
        reservation,
        Math.min(bytes, this.limits.maxBytes),
        leaseEnd(),
        this.quota,
        Math.min(least, this.limits.maxBytes),
      );
    };
    const renewing = setInterval(
      () => {
        if (reserved > 0)
          this.client.storage.extend(tenant.id, reservation, leaseEnd()).catch(() => undefined);
      },
      (RESERVATION_LEASE_S * 1000) / 3,
    );
    /** Whether the reservation is held as the file (`id`) now. */
    let settled = false;
    let file: StoredFile;
    let upload: InputFileUpload | undefined;
    let inFile = false;
    let field: { name: string; bytes: Uint8Array[]; size: number } | undefined;
    let purpose: string | undefined;
    /**
     * A line refused before the purpose was read (the openai client sends the file first):
     * the rest of the body is read for the purpose, whose refusal is the truer answer for a
     * file that was never meant for a batch.
     */
    let refused: FerryError | undefined;
    /** Writes to the file, holding a line's refusal while the purpose is unknown. */
    const intoFile = async (write: () => Promise<void>) => {
      if (refused) return;
      try {
        await write();
      } catch (err) {
        if (purpose !== undefined || !(err instanceof FerryError) || err.code !== "INVALID_INPUT")
          throw err;
        refused = err;
      }
    };
    try {
      for await (const event of events) {
        if (event.type === "part") {
          if (event.name === "file" && event.filename !== undefined) {
            if (upload) throw new FerryError("INVALID_INPUT", "an upload carries one file");
            const nameChars = characters(event.filename, MAX_FILENAME_CHARS);
            if (nameChars > MAX_FILENAME_CHARS)
              throw new FerryError(
                "INVALID_INPUT",
                `the file's name is ${nameChars} characters; at most ${MAX_FILENAME_CHARS}`,
              );
            if (purpose !== undefined) checkPurpose(purpose);
            // a declared length is refused at once if the file may not fit; an unknown one
            // where its bytes cross what is left
            await reserve(declaredBytes ?? RESERVE_STEP_BYTES, declaredBytes ?? 1);
            await this.client.files.begin(
              { id, owner: tenant.id, filename: event.filename, purpose: "batch" },
              writer,
            );
            upload = new InputFileUpload(this.client.files, id, writer, this.limits, this.check);
            inFile = true;
          } else field = { name: event.name, bytes: [], size: 0 };
        } else if (event.type === "data") {
          if (inFile) {
            received += event.data.byteLength;
            if (received > reserved && !tenant.admin)
              await reserve(Math.max(2 * reserved, received), received);
            await intoFile(async () => upload?.write(event.data));
          } else if (field) {
            field.size += event.data.byteLength;
            if (field.size > MAX_FIELD_BYTES)
              throw new FerryError("INVALID_INPUT", `field ${field.name} is too long`);
            field.bytes.push(event.data);
          }
        } else if (inFile) {
          await intoFile(async () => upload?.end());
          inFile = false;
        } else if (field) {
          if (field.name === "purpose") purpose = Buffer.concat(field.bytes).toString("utf8");
          field = undefined;
        }
      }
      if (!upload)
        throw new FerryError("INVALID_INPUT", "the upload needs a file (the field `file`)");
      if (purpose === undefined)
        throw new FerryError("INVALID_INPUT", "the upload needs its purpose (the field `purpose`)");
      checkPurpose(purpose);
      if (refused) throw refused;
      // held as the file before it is whole: from then on a DELETE lets go of what it holds;
      // both until the file's own expiry, from now (from the upload's start, the share had
      // been let go of as long before the file went as the upload took)
      const expiresAtS = Math.floor(Date.now() / 1000) + this.client.files.ttlS;
      if (reserved > 0) {
        await this.client.storage.settle(tenant.id, id, received, expiresAtS, reservation);
        settled = true;
      }
      file = await this.client.files.finish(
        id,
        tenant.id,
        [...upload.urls],
        writer,
        expiresAtS,
        fingerprint?.(),
      );
    } catch (err) {
      if (upload) await this.client.files.discard(id, writer);
      // a retry that took the key over writes the file (this attempt was fenced): its share
      // is the retry's to keep
      if (settled && !(err instanceof WriterFencedError))
        await this.client.storage.release(tenant.id, id);
      else if (reserved > 0 && !settled) await this.client.storage.release(tenant.id, reservation);
      throw err;
    } finally {
      clearInterval(renewing);
    }
    return fileObject(file);
  }

  async get(id: string, tenant: Tenant): Promise<FileObject> {
    return fileObject(await this.stored(id, tenant));
  }

  /**
   * Refuses (QUOTA_EXCEEDED) a batch whose answers would have no room: `tenant`'s files already
   * fill its storage, where the answers are kept as they come (a batch created then would fail
   * at its first answers).
   */
  async assertRoomForAnswers(tenant: Tenant): Promise<void> {
    if (tenant.admin) return;
    const { bytes } = await this.client.storage.usage(tenant.id);
    if (bytes < this.quota.maxBytes) return;
    throw new FerryError(
      "QUOTA_EXCEEDED",
      `${tenant.id === "" ? "This server's file storage (one tenant: API_KEYS is unset)" : "This key's file storage"} is full (${bytes} of ${this.quota.maxBytes} bytes, FILE_STORAGE_PER_KEY_BYTES), and a batch's answers are kept there as they come. Delete files it no longer needs (DELETE /v1/files/{id}), or wait for them to expire.`,
    );
  }

  /** A whole file `tenant` may see. */
  async stored(id: string, tenant: Tenant): Promise<StoredFile> {
    const file = await this.client.files.get(id);
    if (file?.status !== "processed" || !canSee(tenant, file.owner))
      throw new FerryError("NOT_FOUND", `No such File object: ${id}`);
    return file;
  }

  async list(tenant: Tenant, page: ListPage, purpose?: string) {
    const { data, hasMore } = await this.client.files.list(tenant.id, page, purpose);
    return {
      object: "list" as const,
      data: data.map(fileObject),
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: hasMore,
    };
  }

  async delete(id: string, tenant: Tenant) {
    const file = await this.stored(id, tenant);
    await this.client.files.delete(id);
    await this.client.storage.release(file.owner, id);
    return { id, object: "file" as const, deleted: true as const };
  }

  /** The file's bytes as uploaded (or written), a stored chunk at a time. */
  async content(id: string, tenant: Tenant): Promise<AsyncGenerator<Buffer>> {
    return this.client.files.chunks(id, await this.stored(id, tenant));
  }
}

function checkPurpose(purpose: string): void {
  if (!UPLOAD_PURPOSES.includes(purpose))
    throw new FerryError(
      "INVALID_INPUT",
      `purpose ${JSON.stringify(purpose)} is not supported by this server: it keeps files for the Batch API (purpose "batch")`,
    );
}
