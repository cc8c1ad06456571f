// Drives capgate's admin console in headless Chromium (Debian's, through
// playwright-core) as an operator would, and prints a JSON report of what
// it saw for host/e2e/console_test.go to judge:
//
//   node console.mjs --url http://127.0.0.1:PORT --admin-token T
//     --caller-token T --approval ID --capability NAME [--screenshots DIR]
//
// Sign in (after a refused token), find a capability, approve the held
// call ID and see its outcome in the audit trail, switch actions off and
// see the caller's next action refused in the live tail, sign out. Every
// request the page makes must stay on the host, and the page may log no
// error (a Content-Security-Policy violation is one).
import { chromium } from "playwright-core";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    url: { type: "string" },
    "admin-token": { type: "string" },
    "caller-token": { type: "string" },
    approval: { type: "string" },
    capability: { type: "string" },
    screenshots: { type: "string" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
  },
});
for (const k of ["url", "admin-token", "caller-token", "approval", "capability"]) {
  if (!opt[k]) {
    console.error(`console.mjs: --${k} is required`);
    process.exit(2);
  }
}
const base = opt.url.replace(/\/$/, "");
const report = { checks: {}, seen: {}, offsite: [], pageErrors: [], screenshots: [] };
const check = (name, ok, seen) => {
  report.checks[name] = Boolean(ok);
  if (seen !== undefined) report.seen[name] = seen;
  if (!ok) console.error(`check ${name} failed`, seen ?? "");
};
const WAIT = 20000; // the most any one thing may take to appear

const profile = mkdtempSync(join(tmpdir(), "capgate-console-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: opt.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  viewport: { width: 1366, height: 820 },
});
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(WAIT);
page.on("request", (req) => {
  if (!req.url().startsWith(base + "/") && !req.url().startsWith("data:")) report.offsite.push(req.url());
});
page.on("console", (msg) => {
  if (msg.type() === "error") report.pageErrors.push(msg.text());
});
page.on("pageerror", (err) => report.pageErrors.push(String(err)));

async function shot(name) {
  if (!opt.screenshots) return;
  mkdirSync(opt.screenshots, { recursive: true });
  await page.screenshot({ path: join(opt.screenshots, name + ".png") });
  report.screenshots.push(name + ".png");
}

try {
  // Sign in: a page asked for without a session comes back after it.
  await page.goto(base + "/admin/capabilities");
  check("unsignedGoesToSignIn", page.url().startsWith(base + "/admin/signin"), page.url());
  await page.fill("#token", "not-a-configured-token");
  await page.click("button[type=submit]");
  const refused = await page.locator(".error").innerText();
  check("wrongTokenRefused", refused.includes("does not open the console"), refused);
  await page.fill("#token", opt["caller-token"]);
  await page.click("button[type=submit]");
  const refusedCaller = await page.locator(".error").innerText();
  check("nonAdminTokenRefusedAlike", refusedCaller === refused, refusedCaller);
  await shot("signin");
  await page.fill("#token", opt["admin-token"]);
  await page.click("button[type=submit]");
  await page.waitForURL(base + "/admin/capabilities");
  check("signedInAndBack", page.url() === base + "/admin/capabilities", page.url());
  const cookies = await context.cookies(base + "/admin/");
  const ck = cookies.find((c) => c.name === "capgate_console");
  check("cookieHttpOnlyStrict", ck && ck.httpOnly && ck.sameSite === "Strict" && ck.path === "/admin", ck && { ...ck, value: "…" });
  check("cookieHoldsNoToken", ck && !ck.value.includes(opt["admin-token"]) && !Buffer.from(ck.value.split(".")[0], "base64url").toString().includes(opt["admin-token"]));

  // Overview.
  await page.click("nav >> text=Overview");
  await page.waitForURL(base + "/admin/");
  const pending = await page.locator(".card", { hasText: "Waiting for approval" }).locator(".big").innerText();
  check("overviewCountsPending", pending.trim() === "1", pending);
  await shot("overview");

  // Find a capability by name, within its pack.
  await page.click("nav >> text=Capabilities");
  const [pack] = opt.capability.split(".");
  await page.fill("input[name=q]", opt.capability.split(".")[1]);
  await page.selectOption("select[name=pack]", pack);
  await page.click("form.filters button[type=submit]");
  await page.waitForURL(/\/admin\/capabilities\?/);
  const names = await page.locator("#capabilities tbody tr[data-capability]").evaluateAll((rows) => rows.map((r) => r.dataset.capability));
  check("capabilityFound", names.includes(opt.capability) && names.every((n) => n.startsWith(pack + ".")), names);
  const row = page.locator(`#capabilities tr[data-capability="${opt.capability}"]`);
  const riskText = await row.locator(".badge").first().innerText();
  check("capabilityShowsItsRisk", riskText === "dangerous", riskText);
  await shot("capabilities");

  await page.click("nav >> text=Plugins");
  const states = await page.locator("#plugins tbody tr[data-plugin]").evaluateAll((rows) => rows.map((r) => r.dataset.plugin + ":" + r.querySelector(".badge").textContent));
  check("pluginsRunning", states.length >= 1 && states.every((s) => s.endsWith(":running")), states);
  await shot("plugins");

  await page.click("nav >> text=Tokens");
  const tokensText = await page.locator("main").innerText();
  check("tokensMasked", !tokensText.includes(opt["admin-token"]) && !tokensText.includes(opt["caller-token"]) && (await page.locator("#tokens td.masked").count()) >= 2, null);
  await shot("tokens");

  // Approve the held call, then see it run in the audit trail.
  await page.click("nav >> text=Approvals");
  const held = page.locator(`#approvals tr[data-approval="${opt.approval}"]`);
  check("heldCallListed", (await held.count()) === 1);
  await shot("approvals");
  await held.locator("input[name=reason]").fill("agreed with the customer");
  await held.locator("button.approve").click();
  await page.waitForURL(new RegExp("/admin/approvals/" + opt.approval));
  const flash = await page.locator(".flash").innerText();
  check("approvedFlash", flash.startsWith("Approved"), flash);
  let outcome = "";
  for (const end = Date.now() + WAIT; Date.now() < end; await page.waitForTimeout(300)) {
    await page.goto(base + "/admin/approvals/" + opt.approval);
    if ((await page.locator("#outcome").count()) > 0) {
      outcome = await page.locator("#outcome").getAttribute("data-kind");
      break;
    }
  }
  check("approvedCallRan", outcome === "result", outcome);
  await shot("approval");
  await page.click("text=Its audit trail");
  await page.waitForURL(/\/admin\/audit\?approval=/);
  const trail = await page.locator("#audit tbody tr[data-seq]").evaluateAll((rows) => rows.map((r) => r.dataset.capability + "/" + (r.dataset.outcome || "refused:" + r.dataset.step)));
  check("outcomeInAuditTrail", trail.includes(opt.capability + "/ok") && trail.includes(opt.capability + "/held") && trail.includes("capgate.approval/ok"), trail);

  // The kill switch, with its confirmation.
  await page.click("nav >> text=Kill switch");
  await page.click("button:has-text('Switch actions off')");
  check("confirmationAsked", await page.locator(".confirm").isVisible());
  await shot("actions-confirm");
  await page.click("button:has-text('Yes, switch actions off')");
  await page.waitForURL(/\/admin\/actions\?done=off/);
  check("switchedOff", (await page.locator("#switch").getAttribute("data-enabled")) === "false");
  await shot("actions");

  // The caller's next action is refused, and the live tail shows it.
  await page.goto(base + "/admin/audit");
  await page.check("#tail");
  await page.waitForSelector("#tail-status:has-text('live')");
  const res = await fetch(base + "/api/v1/mcp", {
    method: "POST",
    headers: {
      Authorization: "Bearer " + opt["caller-token"],
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2025-11-25",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: opt.capability, arguments: { id: "bk_any" } } }),
  });
  const rpc = await res.json();
  check("actionRefusedAtKillSwitch", rpc.error && rpc.error.code === -32003 && rpc.error.data && rpc.error.data.step === "kill_switch", rpc.error);
  const tailed = page.locator(`#audit tbody tr[data-step="kill_switch"][data-capability="${opt.capability}"]`);
  await tailed.first().waitFor();
  check("refusalInLiveTail", (await tailed.count()) === 1);
  await shot("audit");

  // Sign out: the session is gone from the browser.
  await page.click("button:has-text('Sign out')");
  await page.waitForURL(/\/admin\/signin\?why=out/);
  check("signedOut", (await page.locator(".flash").innerText()).includes("signed out"));
  check("cookieCleared", !(await context.cookies(base + "/admin/")).some((c) => c.name === "capgate_console"));
  await page.goto(base + "/admin/approvals");
  check("pagesNeedSignInAgain", page.url().startsWith(base + "/admin/signin"), page.url());
} catch (err) {
  report.error = String(err && err.stack ? err.stack : err);
} finally {
  check("nothingFetchedElsewhere", report.offsite.length === 0, report.offsite);
  // Chromium logs each answer of 4xx as an error; the refused sign-ins
  // are meant to be 401s. Anything else (a script error, a blocked
  // resource, a policy violation) is a fault.
  const faults = report.pageErrors.filter((e) => !/^Failed to load resource: the server responded with a status of 401/.test(e));
  check("noPageErrors", faults.length === 0, faults);
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(report, null, 2) + "\n");
