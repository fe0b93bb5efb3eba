// Tokens (admin area): the admin's own live tokens by reference (GET /api/v2/tokens: the master keeps none in clear),
// this tab's own marked; a new application token (POST /api/v2/tokens/application), shown once; revoke one.
import { get, post, request, session } from "./api.js";
import { errorText, form, h, panel, show, table } from "./dom.js";

/** The reference the master lists a token by (token- and its SHA-256's first 16 hex digits); null where the browser
 *  offers no digest (a page not served over HTTPS or from localhost). */
async function reference(token) {
  if (!token || !(window.crypto && crypto.subtle)) return null;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return `token-${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 16)}`;
}

export function mount(root, ctx) {
  const list = h("div");
  const listNote = h("p.error", { role: "alert" });
  const fresh = h("div");
  const create = form("app-token", h("p.muted", {}, "An application token never expires; a program uses it as you " +
    "(it may not manage tokens). It is shown once."), "Create application token", async () => {
    const { token } = await post("/api/v2/tokens/application");
    show(fresh, h("p", {}, "The new token: ", h("code.new-token", {}, token)));
    await refresh();
    return "Created; copy it now.";
  });
  root.append(panel("My tokens", listNote, list), panel("Application tokens", create, fresh));
  let mine = null;

  async function refresh() {
    if (mine === null) mine = (await reference(session.get().token)) || "";
    const { tokens } = await get("/api/v2/tokens");
    show(list, table(columns, tokens, { empty: "No live token.", rowAttrs: (t) => ({ "data-token": t }) }));
  }

  const columns = [
    { title: "Token", cell: (t) => [h("code", {}, t), t === mine ? h("span.tag", {}, "this tab") : null] },
    { title: "Actions", class: "actions", cell: (t) => h("button.small.danger", { type: "button",
      "data-action": "revoke", onclick: () => revoke(t) }, "Revoke") },
  ];

  async function revoke(t) {
    if (t === mine && !window.confirm("This is the token of this tab: revoking it signs you out. Revoke it?")) return;
    show(listNote);
    try {
      await request("DELETE", `/api/v2/tokens/${encodeURIComponent(t)}`);
    } catch (e) {
      show(listNote, errorText(e));
    }
    await refresh().catch(ctx.report);
  }

  return { refresh };
}
