import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** URL namespace of the gpuplat REST API, relative to the server base URL. */
export const API_NAMESPACE = 'gpuplat/api';

/**
 * Error raised for a non-2xx answer of the gpuplat API.
 *
 * The server answers errors as `{"error": {"code", "message", "hint"}}`;
 * `message` is what users should read, `hint` (optional) says what to do.
 */
export class GpuPlatAPIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code?: string,
    readonly hint?: string
  ) {
    super(message);
    this.name = 'GpuPlatAPIError';
  }
}

interface IErrorBody {
  error?: { code?: string; message?: string; hint?: string };
  message?: string;
}

/**
 * Call the gpuplat API.
 *
 * @param path - path under `gpuplat/api`, e.g. `queues` or `runs/abc/explain`
 * @param init - fetch options (method, body, ...)
 * @returns the parsed JSON body (`undefined` for an empty body)
 */
export async function requestAPI<T>(path = '', init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, path);

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }

  const text = await response.text();
  let data: unknown = undefined;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch (error) {
      if (response.ok) {
        throw new GpuPlatAPIError(`Invalid JSON from ${url}: ${String(error)}`, response.status);
      }
    }
  }

  if (!response.ok) {
    const body = (data ?? {}) as IErrorBody;
    const message =
      body.error?.message ?? body.message ?? (text || `${response.status} ${response.statusText}`);
    throw new GpuPlatAPIError(message, response.status, body.error?.code, body.error?.hint);
  }
  return data as T;
}
