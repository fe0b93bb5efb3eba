// The REST API, as any client calls it: the user's token as `Authorization: Bearer`, errors as OpenPAI's
// {code, message}. The session (token, user, admin flag) lives in sessionStorage: it ends with the tab.
const KEY = "pai.session";

export const session = {
  get() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch { return null; }
  },
  set(value) { sessionStorage.setItem(KEY, JSON.stringify(value)); },
  clear() { sessionStorage.removeItem(KEY); },
};

export class ApiError extends Error {
  constructor(status, code, message, line) {
    super(message);
    this.status = status;
    this.code = code;
    this.line = line; // a submitted document's error: the line of the field at fault
  }
}

let unauthorized = () => {};
/** What to do when the master refuses the token (expired, revoked): the app signs the user out. */
export function onUnauthorized(fn) { unauthorized = fn; }

/** One request; JSON (or text) back, or an ApiError. `raw`: the Response itself (its body unread, e.g. a stream);
 *  `signal`: an AbortController's, to cancel it. */
export async function request(method, path, { json, body, contentType, accept, raw, signal } = {}) {
  const headers = {};
  const s = session.get();
  if (s && s.token) headers.Authorization = `Bearer ${s.token}`;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (contentType) {
    headers["Content-Type"] = contentType;
  }
  if (accept) headers.Accept = accept;
  const resp = await fetch(path, { method, headers, body, cache: "no-store", signal });
  if (!resp.ok) {
    let code = "", message = `${resp.status} ${resp.statusText}`, line;
    try { ({ code, message, line } = await resp.json()); } catch { /* not JSON */ }
    if (resp.status === 401 && !path.includes("/authn/")) unauthorized();
    throw new ApiError(resp.status, code, message, line);
  }
  if (raw) return resp;
  const type = resp.headers.get("Content-Type") || "";
  return type.includes("json") ? resp.json() : resp.text();
}

export const get = (path, options) => request("GET", path, options);
export const put = (path, json) => request("PUT", path, { json });
export const post = (path, options) => request("POST", path, options);

/** A query string from an object; empty values are left out. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : "";
}

export const jobPath = (key) => `/api/v2/jobs/${encodeURIComponent(key)}`;
export const experimentPath = (key) => `/api/v2/experiments/${encodeURIComponent(key)}`;
