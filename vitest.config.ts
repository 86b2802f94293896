import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// Workspace packages resolve to their TypeScript sources here, to dist/ once built. Not the
// bundlers' "module" condition: Node runs the dependencies, and some packages' "module"
// builds (@opentelemetry/api 1.9's) import files without their extensions, as only bundlers can.
const conditions = ["ferry-source", ...defaultServerConditions.filter((c) => c !== "module")];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    // End-to-end files start real processes; they get generous limits and run two at a time
    // on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    globalSetup: ["test/helpers/global-setup.ts"],
    fileParallelism: true,
    projects: [
      {
        extends: true,
        // beside the code they prove: no stack to start (a real Redis where they need one)
        test: {
          name: "unit",
          include: ["apps/*/src/**/*.test.ts", "packages/*/src/**/*.test.ts", "bench/*.test.ts"],
        },
      },
      {
        extends: true,
        // the real API and workers as child processes, against a real Redis
        test: { name: "e2e", include: ["test/**/*.test.ts"] },
      },
    ],
  },
});
