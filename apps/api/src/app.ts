import { FerryError } from "@ferry/protocol";
import { OpenAPIHono } from "@hono/zod-openapi";
import { registerAdmin } from "./admin/admin-routes.js";
import { registerQueueBoard } from "./admin/queue-board.js";
import { registerAdminReload } from "./admin/reload-routes.js";
import { registerAdminSession } from "./admin/session-routes.js";
import { registerBatches } from "./batches/batches-routes.js";
import { jsonBatchOffLoop } from "./batches/json-batch-body.js";
import { registerOpenAiBatches } from "./batches/openai-batch-routes.js";
import { registerFiles } from "./files/files-routes.js";
import type { Guards } from "./guards.js";
import { registerHealth } from "./health/health-routes.js";
import { registerMetrics } from "./health/metrics-routes.js";
import { allowedMethods } from "./http/allowed-methods.js";
import { errorResponse, invalidInput, toFerryError } from "./http/errors.js";
import { requestId } from "./http/request-id.js";
import { registerPredict } from "./inference/predict-routes.js";
import { registerJobEvents } from "./jobs/job-events-routes.js";
import { registerJobs } from "./jobs/jobs-routes.js";
import { registerV2Generate } from "./kserve-v2/generate-routes.js";
import { registerV2Infer } from "./kserve-v2/infer-routes.js";
import { registerV2Models } from "./kserve-v2/models-routes.js";
import { registerV2Repository } from "./kserve-v2/repository-routes.js";
import { registerV2Stats } from "./kserve-v2/stats-routes.js";
import { admitBeforeBody } from "./middleware/admission.js";
import { answerHeaders } from "./middleware/answer-headers.js";
import { adminAuth, apiKeyAuth } from "./middleware/auth.js";
import { bodyLimits } from "./middleware/body-limits.js";
import { bodyWeight } from "./middleware/body-weight.js";
import { httpMetrics } from "./middleware/http-metrics.js";
import type { InFlight } from "./middleware/in-flight.js";
import { jsonByDefault } from "./middleware/json-by-default.js";
import { chunkedRefusal, keyBodyRate } from "./middleware/key-body-rate.js";
import { securityHeaders } from "./middleware/security-headers.js";
import { tenantLimits } from "./middleware/tenant-limits.js";
import { tracing } from "./middleware/tracing.js";
import { registerChatCompletions } from "./openai/chat-completions-routes.js";
import { registerCompletions } from "./openai/completions-routes.js";
import { registerEmbeddings } from "./openai/embeddings-routes.js";
import { registerResponses } from "./openai/responses-routes.js";
import { registerTokenize } from "./openai/tokenize-routes.js";
import type { HonoEnv, Services } from "./services.js";
import { registerPages } from "./web/pages.js";

/** The routes an API key opens (the rest are the admin's, the pages', the probes'). */
const KEYED_PATHS = ["/v1/*", "/v2/*", "/tokenize", "/detokenize"];

/** Builds the HTTP app around services built once at boot. */
export function createApp(
  services: Services,
  inFlight: InFlight,
  guards: Guards,
): OpenAPIHono<HonoEnv> {
  const app = new OpenAPIHono<HonoEnv>({
    // Schema failures become one 400 that names the field and the problem.
    defaultHook: (result) => {
      if (!result.success) throw invalidInput(result.error.issues);
    },
  });
  if (services.tracing) app.use(tracing());
  app.use(requestId());
  app.use(answerHeaders());
  app.use(securityHeaders());
  app.use(async (c, next) => {
    c.set("services", services);
    await next();
  });
  app.use(inFlight.middleware());
  app.use(httpMetrics());
  app.use(bodyLimits(services, chunkedRefusal(guards.bodyRate, guards.authenticate)));

  const auth = apiKeyAuth(guards.authenticate);
  const limits = tenantLimits(guards.limit);
  const bodyRate = keyBodyRate(guards.bodyRate);
  for (const path of KEYED_PATHS) {
    app.use(path, auth);
    app.use(path, limits);
    app.use(path, bodyRate);
  }
  app.use("/admin/*", adminAuth(services.env.ADMIN_TOKEN));
  app.use("/v2/repository/models/*", adminAuth(services.env.ADMIN_TOKEN));
  for (const path of [
    "/v1/models/:name/predict",
    "/v2/models/:name/infer",
    "/v2/models/:name/versions/:version/infer",
  ])
    app.use(path, admitBeforeBody(guards.turns));
  for (const path of [
    // Ferry's own predict reads a body with no media type as JSON, as Triton's routes below do
    "/v1/models/:name/predict",
    "/v2/models/:name/infer",
    "/v2/models/:name/versions/:version/infer",
    "/v2/models/:name/generate",
    "/v2/models/:name/generate_stream",
    "/v2/models/:name/versions/:version/generate",
    "/v2/models/:name/versions/:version/generate_stream",
  ])
    app.use(path, jsonByDefault);
  // after admission and the media type a body defaults to: a body is weighed as it is parsed
  for (const path of KEYED_PATHS)
    app.use(path, bodyWeight(services, guards.bodyRate, jsonBatchOffLoop));

  registerPages(app);
  registerHealth(app);
  registerMetrics(app);
  registerPredict(app);
  // before the model routes: /v2/models/stats is not a model named "stats"
  registerV2Stats(app);
  registerV2Models(app);
  registerV2Infer(app);
  registerV2Generate(app);
  registerV2Repository(app);
  registerJobs(app);
  registerJobEvents(app);
  registerAdmin(app);
  // before Ferry's own: OpenAI's batches are told apart by their body and their ids
  registerOpenAiBatches(app);
  registerBatches(app);
  registerFiles(app);
  registerAdminReload(app);
  registerAdminSession(app);
  services.refreshQueueBoard = registerQueueBoard(app, services);
  registerCompletions(app);
  registerChatCompletions(app);
  registerEmbeddings(app);
  registerTokenize(app);
  registerResponses(app);
  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: { title: "Ferry", version: "0.1.0", description: "Queue-backed inference server" },
  });

  const allowed = allowedMethods(app.routes);
  app.notFound((c) => {
    const methods = allowed(c.req.path);
    if (methods.length > 0 && !methods.includes(c.req.method)) {
      c.header("Allow", methods.join(", "));
      return errorResponse(
        c,
        new FerryError(
          "METHOD_NOT_ALLOWED",
          `${c.req.path} does not take ${c.req.method}; send ${methods.filter((m) => m !== "HEAD").join(" or ")}`,
        ),
      );
    }
    return errorResponse(
      c,
      new FerryError("NOT_FOUND", `No route for ${c.req.method} ${c.req.path}`),
    );
  });
  app.onError((err, c) => {
    const error = toFerryError(err);
    if (error.code === "INTERNAL")
      services.log.error({ err, requestId: c.get("requestId") }, "unhandled error");
    return errorResponse(c, error);
  });
  return app;
}
