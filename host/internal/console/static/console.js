// The audit trail's live tail: while the box is ticked, ask the console
// every two seconds for the records past the newest one shown, and put
// them on top. The rows come rendered (and escaped) by the server.
"use strict";
(function () {
  const box = document.getElementById("tail");
  if (!box) return;
  const status = document.getElementById("tail-status");
  const body = document.querySelector("#audit tbody");
  let cursor = box.dataset.cursor || "0";
  let timer = null;
  let busy = false;

  function say(text) { status.textContent = text; }

  async function poll() {
    if (busy) return;
    busy = true;
    try {
      const q = new URLSearchParams(box.dataset.query || "");
      q.set("after", cursor);
      const res = await fetch("/admin/audit/tail?" + q.toString(), { credentials: "same-origin", cache: "no-store" });
      if (res.status === 401) {
        stop();
        say("signed out; reload the page to sign in");
        return;
      }
      if (!res.ok) {
        say("tail failed: " + (await res.text()).slice(0, 200));
        return;
      }
      const html = (await res.text()).trim();
      cursor = res.headers.get("X-Tail-Next") || cursor;
      if (html) {
        const none = body.querySelector("tr.none");
        if (none) none.remove();
        body.insertAdjacentHTML("afterbegin", html);
        body.querySelectorAll("tr.fresh").forEach((tr) => tr.classList.remove("fresh"));
        for (let tr = body.firstElementChild; tr && Number(tr.dataset.seq) > 0 && !tr.classList.contains("seen"); tr = tr.nextElementSibling) {
          tr.classList.add("fresh", "seen");
        }
      }
      say("live · checked " + new Date().toLocaleTimeString());
    } catch (e) {
      say("tail failed: " + e.message);
    } finally {
      busy = false;
    }
  }

  function start() { say("live"); poll(); timer = setInterval(poll, 2000); }
  function stop() { clearInterval(timer); timer = null; box.checked = false; }

  body.querySelectorAll("tr").forEach((tr) => tr.classList.add("seen"));
  box.addEventListener("change", () => { if (box.checked) start(); else { stop(); say(""); } });
})();
