import { FerryError } from "@ferry/protocol";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { ADMIN_COOKIE, secretEquals } from "../middleware/auth.js";
import type { HonoEnv } from "../services.js";

/** How long a browser stays signed in to /admin, in seconds. */
const SESSION_S = 12 * 3_600;

/**
 * The browser's way into /admin: the dashboard's form posts the admin token here, and it comes
 * back as an HttpOnly, SameSite=Strict cookie that scripts cannot read and other sites cannot
 * send. API clients keep using `Authorization: Bearer`.
 */
export function registerAdminSession(app: OpenAPIHono<HonoEnv>): void {
  app.post("/dashboard/session", async (c) => {
    const expected = c.get("services").env.ADMIN_TOKEN;
    // the form's own page says why a sign-in failed; a script posting here gets the error
    const fromPage = (c.req.header("Accept") ?? "").includes("text/html");
    if (!expected) {
      if (fromPage) return c.redirect("/dashboard?signin=disabled", 303);
      throw new FerryError("FORBIDDEN", "Admin routes are disabled: ADMIN_TOKEN is not set");
    }
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const given = typeof form.token === "string" ? form.token : "";
    if (!secretEquals(given, expected)) {
      if (fromPage) return c.redirect("/dashboard?signin=invalid", 303);
      throw new FerryError("UNAUTHORIZED", "Invalid admin token");
    }
    setCookie(c, ADMIN_COOKIE, given, {
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      maxAge: SESSION_S,
      secure: c.req.url.startsWith("https:"),
    });
    return c.redirect("/dashboard", 303);
  });
  app.post("/dashboard/logout", (c) => {
    deleteCookie(c, ADMIN_COOKIE, { path: "/" });
    return c.redirect("/dashboard", 303);
  });
  // whether this browser is signed in, always 200: a page that asks never logs a failed load
  app.get("/dashboard/session", (c) => {
    const expected = c.get("services").env.ADMIN_TOKEN;
    const given = getCookie(c, ADMIN_COOKIE);
    return c.json({
      enabled: Boolean(expected),
      signed_in: Boolean(expected && given && secretEquals(given, expected)),
    });
  });
  app.get("/admin/dashboard", async (c) => c.json(await c.get("services").admin.dashboard(), 200));
}
