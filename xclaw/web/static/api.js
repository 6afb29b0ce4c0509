// The access token and the HTTP JSON API under /api/.
//
// The server prints http://127.0.0.1:PORT/?token=…; the page keeps the token in localStorage
// and takes it out of the address bar at once (so it does not end up in bookmarks, screen
// shares or the browser history). It travels as `Authorization: Bearer` on /api/ calls and
// as ?token= on the WebSocket URL (browsers cannot set headers on a WebSocket).

export const TOKEN_KEY = "xclaw_token";
export const SESSION_KEY = "xclaw_session_id"; // the original tutorial's name: changing it switches session

export class Unauthorized extends Error {}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Move ?token= (and ?session=) from the address bar into localStorage. */
export function adoptUrlParams() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  const session = url.searchParams.get("session");
  if (token) localStorage.setItem(TOKEN_KEY, token);
  if (session) localStorage.setItem(SESSION_KEY, session);
  if (token || session) {
    url.searchParams.delete("token");
    url.searchParams.delete("session");
    history.replaceState(null, "", url.pathname + (url.search === "?" ? "" : url.search) + url.hash);
  }
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

export function storedSessionId() {
  return localStorage.getItem(SESSION_KEY) || null;
}

export function storeSessionId(id) {
  if (id) localStorage.setItem(SESSION_KEY, id);
  else localStorage.removeItem(SESSION_KEY);
}

/** A new session's id, made here so the page is on it at once (docs/web.md): 128 random bits,
 * URL-safe base64 without padding, starting with a letter or digit — as the server makes them
 * (xclaw/store/steps/rows.py new_session_id; an id may not start with - or _). */
export function newSessionId() {
  for (;;) {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    const id = btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    if (/^[A-Za-z0-9]/.test(id)) return id;
  }
}

export function wsUrl() {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  const token = getToken();
  return `${scheme}//${window.location.host}/ws${token ? `?token=${encodeURIComponent(token)}` : ""}`;
}

/** fetch /api/PATH with the token; JSON in, JSON out. Raises Unauthorized on 401 and
 * ApiError (with the server's code and text) on any other failure. */
export async function api(path, { method = "GET", body, raw = false } = {}) {
  // No token (signed in by a proxy in front, docs/teams.md): no header, or it would replace
  // the browser's own credentials for that proxy.
  const headers = getToken() ? { Authorization: `Bearer ${getToken()}` } : {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(`/api${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "offline", "the xclaw server cannot be reached");
  }
  if (response.status === 401) throw new Unauthorized("missing or wrong access token");
  if (!response.ok) {
    let code = "http_" + response.status;
    let text = `${method} ${path} failed (${response.status})`;
    try {
      const data = await response.json();
      code = data.code || code;
      text = data.error || text;
    } catch (e) {
      /* not JSON: keep the generic text */
    }
    throw new ApiError(response.status, code, text);
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

export const schedulesApi = {
  list: () => api("/schedules").then((d) => d.schedules),
};

export const sessionsApi = {
  list: () => api("/sessions?limit=500").then((d) => d.sessions),
  get: (sid) => api(`/sessions/${encodeURIComponent(sid)}`),
  rename: (sid, title) => api(`/sessions/${encodeURIComponent(sid)}`, { method: "PATCH", body: { title } }),
  remove: (sid) => api(`/sessions/${encodeURIComponent(sid)}`, { method: "DELETE" }),
  steps: (sid) => api(`/sessions/${encodeURIComponent(sid)}/steps?n=0`).then((d) => d.steps),
  tree: (sid) => api(`/sessions/${encodeURIComponent(sid)}/tree`).then((d) => d.tree),
  rollback: (sid, stepId, opts = {}) => api(`/sessions/${encodeURIComponent(sid)}/rollback`, { method: "POST", body: { stepId, ...opts } }),
  rollbackPreview: (sid, stepId) => api(`/sessions/${encodeURIComponent(sid)}/rollback/${encodeURIComponent(stepId)}`),
  abandonRollback: (sid) => api(`/sessions/${encodeURIComponent(sid)}/rollback/abandon`, { method: "POST" }),
  processes: (sid) => api(`/sessions/${encodeURIComponent(sid)}/processes`),
  fork: (sid, stepId, title) => api(`/sessions/${encodeURIComponent(sid)}/fork`, { method: "POST", body: { stepId, title } }),
  exportLines: (sid) => api(`/sessions/${encodeURIComponent(sid)}/export`, { raw: true }),
};
