import type { ModelEntry } from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import type { ServingState } from "@ferry/transport";

/**
 * Canary routing: an unpinned request goes to a version drawn by the model's traffic split
 * (shared by every replica through Redis); without a split, to the stable version.
 */
export class TrafficRouter {
  constructor(
    private readonly state: ServingState,
    private readonly random: () => number = Math.random,
  ) {}

  /** A split as it will be stored: every version known, whole percentages adding up to 100. */
  validate(entry: ModelEntry, split: Record<string, unknown>): Record<string, number> {
    return validateSplit(entry, split);
  }

  async pick(entry: ModelEntry): Promise<string> {
    const split = await this.state.getTraffic(entry.config.name);
    if (!split) return entry.defaultVersion;
    let roll = this.random() * 100;
    for (const [version, percent] of Object.entries(split)) {
      roll -= percent;
      if (roll < 0 && entry.versions.includes(version)) return version;
    }
    return entry.defaultVersion;
  }
}

/** A split must name existing versions with whole percentages that add up to 100. */
export function validateSplit(
  entry: ModelEntry,
  split: Record<string, unknown>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [version, percent] of Object.entries(split)) {
    if (!entry.versions.includes(version)) {
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${entry.config.name}' has no version '${version}'`,
      );
    }
    if (typeof percent !== "number" || !Number.isInteger(percent) || percent < 0 || percent > 100) {
      throw new FerryError(
        "INVALID_INPUT",
        `Traffic for version '${version}' must be a whole percentage from 0 to 100`,
      );
    }
    out[version] = percent;
  }
  const total = Object.values(out).reduce((a, b) => a + b, 0);
  if (total !== 100)
    throw new FerryError("INVALID_INPUT", `Traffic must add up to 100, got ${total}`);
  return out;
}
