// Calls to Quarry's API. The session cookie signs them in. No custom header guards the
// changes: the browser itself tells the server where a request comes from (Sec-Fetch-Site,
// Origin), and the server refuses a change that another origin's page started.

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.error_message)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

export async function call(method, path, body, { signal, raw } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, credentials: 'same-origin', signal,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (raw && response.ok) return response;
  return answerOf(response.status, await response.text());
}

// An answer's JSON (its text as `detail` when it is not JSON); ApiError unless it is a 2xx.
export function answerOf(status, text) {
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text }; }
  }
  if (status < 200 || status >= 300) throw new ApiError(status, data);
  return data;
}

export const get = (path, opts) => call('GET', path, undefined, opts);
export const post = (path, body, opts) => call('POST', path, body, opts);
export const put = (path, body, opts) => call('PUT', path, body, opts);
export const del = (path, opts) => call('DELETE', path, undefined, opts);

export const enc = encodeURIComponent;
