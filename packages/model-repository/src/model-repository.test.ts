import { cpSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ModelRepository } from "./model-repository.js";

// a copy of two shipped models, edited per test
const roots: string[] = [];
const repositoryOf = (...models: string[]) => {
  const root = mkdtempSync(join(tmpdir(), "ferry-repo-"));
  roots.push(root);
  for (const model of models)
    cpSync(join(import.meta.dirname, "../../../models", model), join(root, model), {
      recursive: true,
    });
  return root;
};
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe("re-reading one model", () => {
  it("takes that model's new version and leaves another model's edits, broken ones too, unread", async () => {
    const root = repositoryOf("digits", "mnist");
    const repo = await ModelRepository.open(root);
    cpSync(join(root, "digits/1"), join(root, "digits/5"), { recursive: true });
    cpSync(join(root, "mnist/1"), join(root, "mnist/5"), { recursive: true });
    writeFileSync(join(root, "mnist/model.json"), "{ half-written");
    repo.adoptModel(await repo.rereadModel("digits"));
    expect(repo.get("digits").versions).toEqual(["1", "2", "5"]);
    expect(repo.resolve("digits", "5").entry.dir).toBe(join(root, "digits"));
    expect(repo.get("mnist").versions).toEqual(["1"]);
    await expect(repo.rereadModel("mnist")).rejects.toThrow(/mnist\/model\.json: not valid JSON/);
  });

  it("dates a model by its default version's file (OpenAI's `created`), a new default by its own", async () => {
    const root = repositoryOf("digits");
    const built = new Date("2026-03-01T12:00:00Z");
    utimesSync(join(root, "digits/2/model.onnx"), built, built);
    const repo = await ModelRepository.open(root);
    expect(repo.get("digits").created).toBe(built.getTime() / 1000);
    cpSync(join(root, "digits/1"), join(root, "digits/3"), { recursive: true });
    const copied = new Date("2026-04-01T00:00:00Z");
    utimesSync(join(root, "digits/3/model.onnx"), copied, copied);
    const config = JSON.parse(readFileSync(join(root, "digits/model.json"), "utf8"));
    writeFileSync(
      join(root, "digits/model.json"),
      JSON.stringify({ ...config, stable_version: "3" }),
    );
    repo.adoptModel(await repo.rereadModel("digits"));
    expect(repo.get("digits").created).toBe(copied.getTime() / 1000);
  });

  it("finds a model added since the repository was opened, listed in order", async () => {
    const root = repositoryOf("mnist");
    const repo = await ModelRepository.open(root);
    cpSync(join(import.meta.dirname, "../../../models/digits"), join(root, "digits"), {
      recursive: true,
    });
    repo.adoptModel(await repo.rereadModel("digits"));
    expect(repo.list().map((m) => m.config.name)).toEqual(["digits", "mnist"]);
  });

  it("refuses a model that is not there, or whose model.json names another", async () => {
    const root = repositoryOf("digits");
    const repo = await ModelRepository.open(root);
    await expect(repo.rereadModel("nope")).rejects.toMatchObject({ code: "MODEL_NOT_FOUND" });
    // a name is never a path: not out of the repository, not into another model's directory
    for (const name of ["x/../digits", "../digits", ".", "a/b"])
      await expect(repo.rereadModel(name)).rejects.toMatchObject({ code: "MODEL_NOT_FOUND" });
    const path = join(root, "digits/model.json");
    writeFileSync(path, readFileSync(path, "utf8").replace('"name": "digits"', '"name": "other"'));
    await expect(repo.rereadModel("digits")).rejects.toThrow(/names the model 'other'/);
  });
});
