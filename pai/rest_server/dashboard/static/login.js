// Sign in with the API's login (POST /api/v2/authn/basic/login), then read the admin flag from the users API.
import { ApiError, get, post, session } from "./api.js";
import { h, show } from "./dom.js";

export function mount(root, ctx) {
  const error = h("p.error", { role: "alert" });
  const user = h("input", { name: "username", autocomplete: "username", required: true, autofocus: true });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const button = h("button.primary", { type: "submit" }, "Sign in");
  const form = h("form.login", { onsubmit: (e) => { e.preventDefault(); signIn(); } },
    h("h1", {}, "pai"),
    h("p.muted", {}, "Sign in with your cluster account."),
    h("label", {}, "User", user),
    h("label", {}, "Password", password),
    button, error);
  root.append(form);

  async function signIn() {
    button.disabled = true;
    show(error);
    try {
      const login = await post("/api/v2/authn/basic/login",
        { json: { username: user.value.trim(), password: password.value } });
      session.set({ token: login.token, user: login.user, admin: Boolean(login.admin) });
      const me = await get(`/api/v2/users/${encodeURIComponent(login.user)}`);
      session.set({ token: login.token, user: login.user, admin: Boolean(me.admin) });
      ctx.navigate(ctx.query.get("next") || "#/cluster");
    } catch (e) {
      session.clear();
      show(error, e instanceof ApiError ? e.message : `The master did not answer: ${e.message}`);
    } finally {
      button.disabled = false;
    }
  }
  return { title: "Sign in" };
}
