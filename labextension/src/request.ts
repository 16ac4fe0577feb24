import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** The API namespace of nbmemory's server extension. */
export const NAMESPACE = 'nbmemory';

/** Errors of the store that pass by themselves: held by another process for a while, a
 * team server away, an owner busy or restarting (not a store too new or damaged). */
const PASSING = ['StoreLocked', 'StoreUnreachable', 'StoreUnavailable'];

/** An error reply from the server, carrying its message, HTTP status and error class. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly type: string = ''
  ) {
    super(message);
  }

  /** No answer at all: Jupyter's server is stopped, or the network is down. */
  get unreachable(): boolean {
    return this.status === 0;
  }

  /** A condition that passes by itself (no server, the store busy or held elsewhere),
   * not a refusal of what was asked, a bug (500) or a store too new or damaged. */
  get transient(): boolean {
    return (
      this.status === 0 ||
      this.status === 502 ||
      this.status === 504 ||
      (this.status === 503 && PASSING.includes(this.type))
    );
  }
}

/** What a request that got no answer says (the model words it in the user's language). */
export const UNREACHABLE =
  "JupyterLab's server is not responding (stopped, or the network is down).";

/**
 * Call nbmemory's REST API and return the JSON reply.
 *
 * Errors become `ApiError`s whose message is the server's (`{"message": ...}`), with the
 * commands it suggests in the magics' words.
 */
export async function requestAPI<T>(
  endPoint: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, NAMESPACE, endPoint);
  // What to run next is worded as a notebook user runs it: %memory reinstate 12.
  const headers = new Headers(init.headers);
  headers.set('X-NbMemory-Words', 'magic');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, { ...init, headers }, settings);
  } catch (error) {
    // The browser's own words ("TypeError: Failed to fetch") tell a user nothing.
    console.warn('nbmemory: no answer from the Jupyter server', error);
    throw new ApiError(UNREACHABLE, 0);
  }
  const text = await response.text();
  let data: any = null;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const message =
      data && typeof data.message === 'string'
        ? data.message
        : `${response.status} ${response.statusText}`;
    const type = data && typeof data.error === 'string' ? data.error : '';
    throw new ApiError(message, response.status, type);
  }
  return data as T;
}

/** A JSON body for POST/PATCH requests. */
export function json(method: string, body: unknown = {}): RequestInit {
  return { method, body: JSON.stringify(body) };
}
