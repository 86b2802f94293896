import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // Workspace packages resolve to their TypeScript sources here, to dist/ once built.
  resolve: { conditions: ["ferry-source", ...defaultServerConditions] },
  ssr: { resolve: { conditions: ["ferry-source", ...defaultServerConditions] } },
  test: {
    include: [
      "apps/*/src/**/*.test.ts",
      "packages/*/src/**/*.test.ts",
      "test/**/*.test.ts",
      "bench/*.test.ts",
    ],
    // End-to-end files start real processes; they get generous limits and run two at a time
    // on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    fileParallelism: true,
  },
});
