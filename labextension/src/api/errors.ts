/** The error the gpuplat API answers with; views may test for it (`instanceof`) without the service. */

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
