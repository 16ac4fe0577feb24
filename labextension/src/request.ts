import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** The API namespace of nbmemory's server extension. */
export const NAMESPACE = 'nbmemory';

/** An error reply from the server, carrying its message and HTTP status. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

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
    throw new ApiError(`Cannot reach the Jupyter server: ${error}`, 0);
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
    throw new ApiError(message, response.status);
  }
  return data as T;
}

/** A JSON body for POST/PATCH requests. */
export function json(method: string, body: unknown = {}): RequestInit {
  return { method, body: JSON.stringify(body) };
}
